package systemtest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestStorageQuotaCountsAndBoundsAttempts: with --account-storage 1MiB, an
// account's PROXY Endpoint (response capture on) whose local process
// answers 200 KiB gets one small delivery, then is retried through the API.
// Each attempt's captured answer counts toward the account's stored bytes,
// so after a few retries the account is at its quota: new deliveries get
// 507, and retries are refused QUOTA_EXCEEDED without being attempted, so
// 40 more write next to nothing to the data folder.
func TestStorageQuotaCountsAndBoundsAttempts(t *testing.T) {
	answer := make([]byte, 100<<10)
	_, _ = rand.Read(answer)
	body := []byte(hex.EncodeToString(answer)) // 200 KiB, not compressible below 100 KiB
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}), true, "--admin-token", quotaAdmin, "--account-storage", "1MiB")
	if resp := p.send(t, "POST", "/hook", nil, []byte(`{"n":1}`)); resp.Status != 200 {
		t.Fatalf("first delivery: %d", resp.Status)
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/hook")
	time.Sleep(500 * time.Millisecond)
	first := usageOf(t, p.r, p.acct.ID).StoredBytes
	var retried, refused int
	for range 40 {
		res := p.r.GraphQL(t, p.acct.Token, retryMutation, map[string]any{"id": d.ID})
		if len(res.Errors) == 0 {
			retried++
			continue
		}
		if c := res.Errors[0].Code(); c != "QUOTA_EXCEEDED" {
			t.Fatalf("retry refused with %s (%s), want QUOTA_EXCEEDED", c, res.Errors[0].Message)
		}
		refused++
		break
	}
	u := usageOf(t, p.r, p.acct.ID)
	t.Logf("first delivery: storedBytes %d; %d retries made, then refused; storedBytes %d (quota 1 MiB)", first, retried, u.StoredBytes)
	if refused == 0 {
		t.Fatalf("40 retries of 200 KiB answers under a 1 MiB quota were all made: storedBytes %d", u.StoredBytes)
	}
	// Each answer counts: the retries made moved the stored bytes by about
	// their size each.
	if grew := u.StoredBytes - first; retried == 0 || grew < int64(retried)*200<<10 {
		t.Fatalf("%d retries storing 200 KiB answers moved storedBytes by %d", retried, grew)
	}
	if resp := p.send(t, "POST", "/hook2", nil, []byte(`{"n":2}`)); resp.Status != 507 {
		t.Fatalf("a new delivery of an account at its quota answered %d, want 507", resp.Status)
	}

	attempts := func() int {
		var out struct {
			Delivery struct{ Attempts []struct{ ID string } }
		}
		p.r.MustGraphQL(t, p.acct.Token, `query($id: ID!){ delivery(id: $id){ attempts { id } } }`, map[string]any{"id": d.ID}, &out)
		return len(out.Delivery.Attempts)
	}
	before := attempts()
	time.Sleep(time.Second)
	mid := dirSize(t, p.r.Data)
	for range 40 {
		if c := p.r.ErrorCode(t, p.acct.Token, retryMutation, map[string]any{"id": d.ID}); c != "QUOTA_EXCEEDED" {
			t.Fatalf("retry over quota: %s, want QUOTA_EXCEEDED", c)
		}
	}
	time.Sleep(time.Second)
	after := dirSize(t, p.r.Data)
	u2 := usageOf(t, p.r, p.acct.ID)
	t.Logf("data folder: %d after the retries made, %d after 40 refused (storedBytes %d -> %d)", mid, after, u.StoredBytes, u2.StoredBytes)
	if n := attempts(); n != before || after-mid > 200<<10 || u2.StoredBytes != u.StoredBytes {
		t.Fatalf("40 retries refused over quota: attempts %d -> %d, %d bytes more in the data folder; storedBytes %d -> %d",
			before, n, after-mid, u.StoredBytes, u2.StoredBytes)
	}
}
