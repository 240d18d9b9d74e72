package systemtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestCopiesOverQuotaStoreNoBodies: an account's PROXY Endpoint (response
// capture on) has two listeners. The primary answers at once; the other's
// local process holds its answers (200 KiB each) until told. Eight
// deliveries are answered by the primary, then the operator sets the
// account's storage quota below what it stores, then the copies answer.
// They are recorded without their bodies, saying why: the account's stored
// bytes and the data folder grow by the answers' headers, not by 1.6 MB of
// bodies past the quota.
func TestCopiesOverQuotaStoreNoBodies(t *testing.T) {
	t.Parallel()
	const deliveries = 8
	random := make([]byte, 100<<10)
	_, _ = rand.Read(random)
	answer := []byte(hex.EncodeToString(random)) // 200 KiB, not compressible below 100 KiB

	r := harness.Start(t, "", "--admin-token", quotaAdmin, "--forward-timeout", "2m")
	acct := signUpTenant(t, r, "owner")
	primary := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	var got atomic.Int64
	release := make(chan struct{})
	copyTarget := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		select {
		case <-release:
			_, _ = w.Write(answer)
		case <-r.Context().Done(): // the agent went: the test failed before the release
		}
	}))
	var once sync.Once
	releaseCopies := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseCopies)

	ep := proxyEndpoint(t, r, acct.Token, primary, true)
	startAgentFor(t, r, acct.Token, ep.ID, primary)
	r.StartAgent(t, acct.Token, ep.ID, copyTarget)
	harness.Eventually(t, 15*time.Second, "two listeners", func() bool { return len(endpointListeners(t, r, acct.Token, ep.ID)) == 2 })

	var ids []string
	for i := range deliveries {
		path := "/hook/" + strconv.Itoa(i)
		if res := send(t, r, ep.ID, "POST", path, nil, []byte(strings.Repeat("x", 1024))); res.Status != 200 || string(res.Body) != "ok" {
			t.Fatalf("delivery %d: %d %q, want the primary's 200 ok", i, res.Status, res.Body)
		}
		ids = append(ids, deliveryAt(t, r, acct.Token, ep.ID, path).ID)
	}
	harness.Eventually(t, 15*time.Second, "every copy at the second listener's local process", func() bool { return got.Load() == deliveries })

	if out, code := harness.RunCLI(t, "accounts", "set-quota", acct.ID, "--storage", "1KiB", "--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 {
		t.Fatalf("set-quota exited %d:\n%s", code, out)
	}
	before := usageOf(t, r, acct.ID)
	if before.StorageQuota == nil || before.StoredBytes < *before.StorageQuota {
		t.Fatalf("usage %+v: the account is not at its quota before the copies answer", before)
	}
	sizeBefore := dirSize(t, r.Data)

	releaseCopies()
	type copyAnswer struct {
		Role     string
		Status   *int
		Response *struct {
			Captured bool
		}
	}
	copies := func(id string) []copyAnswer {
		var out struct {
			Delivery struct{ Attempts []copyAnswer }
		}
		r.MustGraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ attempts{ role status response{ captured } } } }`, map[string]any{"id": id}, &out)
		var cs []copyAnswer
		for _, a := range out.Delivery.Attempts {
			if a.Role == "COPY" {
				cs = append(cs, a)
			}
		}
		return cs
	}
	harness.Eventually(t, 30*time.Second, "every copy's answer recorded", func() bool {
		for _, id := range ids {
			if cs := copies(id); len(cs) != 1 || cs[0].Status == nil {
				return false
			}
		}
		return true
	})
	after := usageOf(t, r, acct.ID)
	sizeAfter := dirSize(t, r.Data)
	captured := 0
	for _, id := range ids {
		if cs := copies(id); intp(cs[0].Status) != "200" {
			t.Errorf("delivery %s: copy answered %s, want 200", id, intp(cs[0].Status))
		} else if cs[0].Response != nil && cs[0].Response.Captured {
			captured++
		}
	}
	t.Logf("%d copies of 200 KiB answered over a 1 KiB quota: %d captured; storedBytes %d -> %d, data folder %d -> %d",
		deliveries, captured, before.StoredBytes, after.StoredBytes, sizeBefore, sizeAfter)
	if grew := after.StoredBytes - before.StoredBytes; captured > 0 || grew > deliveries*4<<10 {
		t.Errorf("over its quota the account's copies stored %d answers with their bodies, storedBytes grew by %d", captured, grew)
	}
	// The log's and the views' pages for the answers' headers, not their bodies.
	if grew := sizeAfter - sizeBefore; grew > deliveries*int64(len(answer))/2 {
		t.Errorf("the data folder grew by %d bytes for %d copies answered over the quota", grew, deliveries)
	}

	// Each copy says why its body is not stored.
	var out struct {
		Delivery struct {
			Attempts []struct {
				Role     string
				Response *struct {
					Captured    bool
					NotCaptured *string
				}
			}
		}
	}
	res := r.GraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ attempts{ role response{ captured notCaptured } } } }`, map[string]any{"id": ids[0]})
	if len(res.Errors) > 0 {
		t.Fatalf("attempts' responses: %s", res.Errors[0].Message)
	}
	if err := json.Unmarshal(res.Data, &out); err != nil {
		t.Fatal(err)
	}
	for _, a := range out.Delivery.Attempts {
		switch {
		case a.Response == nil:
			t.Errorf("%s attempt without a response", a.Role)
		case a.Role == "COPY" && (a.Response.Captured || strp(a.Response.NotCaptured) != `"storage quota exceeded"`):
			t.Errorf("the copy's response: captured %v, notCaptured %s; want false, storage quota exceeded", a.Response.Captured, strp(a.Response.NotCaptured))
		case a.Role == "PRIMARY" && (!a.Response.Captured || a.Response.NotCaptured != nil):
			t.Errorf("the primary's response (before the quota): captured %v, notCaptured %s", a.Response.Captured, strp(a.Response.NotCaptured))
		}
	}
}
