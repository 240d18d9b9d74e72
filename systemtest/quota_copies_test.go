package systemtest

import (
	"bytes"
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

// incompressible is n bytes (n even) of hex of random bytes: a local
// answer that takes at least n/2 bytes in the log however it is
// compressed.
func incompressible(n int) []byte {
	random := make([]byte, n/2)
	_, _ = rand.Read(random)
	return []byte(hex.EncodeToString(random))
}

// TestCopiesOverQuotaStoreNoBodies: an account's PROXY Endpoint (response
// capture on) has two listeners. The primary answers at once; the other's
// local process holds its answers (200 KiB each) until told. Eight
// deliveries are answered by the primary, then the account may store no
// more, then the copies answer. They are recorded without their bodies,
// saying why: the account's stored bytes and the data folder grow by the
// answers' headers, not by 1.6 MB of bodies past the bound. The account
// may store no more because the operator set its storage quota below what
// it stores, or because it was made by open sign-up and the accounts its
// network signed up hold their share of --signup-storage (its own quota
// has room): before that bound was asked, those copies stored their
// bodies.
func TestCopiesOverQuotaStoreNoBodies(t *testing.T) {
	t.Parallel()
	const deliveries = 8
	answer := incompressible(200 << 10)

	for _, tc := range []struct {
		name  string
		flags []string
		// over makes the account unable to store more once the copies
		// are out.
		over func(t *testing.T, r *harness.Relay, acct tenant, ep endpointInfo)
		want string // the copies' notCaptured
	}{
		{name: "the account's storage quota", want: "storage quota exceeded",
			over: func(t *testing.T, r *harness.Relay, acct tenant, _ endpointInfo) {
				t.Helper()
				if out, code := harness.RunCLI(t, "accounts", "set-quota", acct.ID, "--storage", "1KiB", "--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 {
					t.Fatalf("set-quota exited %d:\n%s", code, out)
				}
				if u := usageOf(t, r, acct.ID); u.StorageQuota == nil || u.StoredBytes < *u.StorageQuota {
					t.Fatalf("usage %+v: the account is not at its quota before the copies answer", u)
				}
			}},
		// A network's share is 64 KiB: the eight deliveries stay under
		// it, a 96 KiB one takes the account past it.
		{name: "the storage for sign-ups", flags: []string{"--signup-storage", "1MiB"}, want: "storage for sign-ups full",
			over: func(t *testing.T, r *harness.Relay, acct tenant, ep endpointInfo) {
				t.Helper()
				if res := send(t, r, ep.ID, "POST", "/fill", nil, bytes.Repeat([]byte("f"), 96<<10)); res.Status != 200 {
					t.Fatalf("the delivery that fills the network's share: %d %q", res.Status, res.Body)
				}
				harness.Eventually(t, 15*time.Second, "deliveries refused by the storage for sign-ups", func() bool {
					res := send(t, r, ep.ID, "POST", "/refused", nil, []byte("x"))
					return res.Status == http.StatusInsufficientStorage && strings.Contains(string(res.Body), "open sign-up")
				})
				if u := usageOf(t, r, acct.ID); u.StorageQuota != nil && u.StoredBytes >= *u.StorageQuota {
					t.Fatalf("usage %+v: the account is at its own quota, not only the storage for sign-ups", u)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			copiesOverQuotaStoreNoBodies(t, tc.flags, deliveries, answer, tc.over, tc.want)
		})
	}
}

// copiesOverQuotaStoreNoBodies runs TestCopiesOverQuotaStoreNoBodies on a
// relay started with flags: over makes the account unable to store more
// while the copies of deliveries are out, want is what their answers'
// notCaptured says.
func copiesOverQuotaStoreNoBodies(t *testing.T, flags []string, deliveries int, answer []byte, over func(*testing.T, *harness.Relay, tenant, endpointInfo), want string) {
	t.Helper()
	r := harness.Start(t, "", append([]string{"--admin-token", quotaAdmin, "--forward-timeout", "2m"}, flags...)...)
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
	harness.Eventually(t, 15*time.Second, "every copy at the second listener's local process", func() bool { return got.Load() == int64(deliveries) })

	over(t, r, acct, ep)
	before := usageOf(t, r, acct.ID)
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
	t.Logf("%d copies of 200 KiB answered once the account may store no more: %d captured; storedBytes %d -> %d, data folder %d -> %d",
		deliveries, captured, before.StoredBytes, after.StoredBytes, sizeBefore, sizeAfter)
	if grew := after.StoredBytes - before.StoredBytes; captured > 0 || grew > int64(deliveries)*4<<10 {
		t.Errorf("over its quota the account's copies stored %d answers with their bodies, storedBytes grew by %d", captured, grew)
	}
	// The log's and the views' pages for the answers' headers, not their bodies.
	if grew := sizeAfter - sizeBefore; grew > int64(deliveries)*int64(len(answer))/2 {
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
		case a.Role == "COPY" && (a.Response.Captured || strp(a.Response.NotCaptured) != strconv.Quote(want)):
			t.Errorf("the copy's response: captured %v, notCaptured %s; want false, %s", a.Response.Captured, strp(a.Response.NotCaptured), want)
		case a.Role == "PRIMARY" && (!a.Response.Captured || a.Response.NotCaptured != nil):
			t.Errorf("the primary's response (before the quota): captured %v, notCaptured %s", a.Response.Captured, strp(a.Response.NotCaptured))
		}
	}
}
