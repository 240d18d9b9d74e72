package projections

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestQuotasCountWhatTheViewsHaveNotApplied: a receipt the recorder
// reports counts against its account's and its inspector's stored bytes at
// once, while the views still linger before applying it, and only once
// after they have.
func TestQuotasCountWhatTheViewsHaveNotApplied(t *testing.T) {
	// The views linger an hour between batches: only a WaitFor applies.
	e := newEnv(t, Options{Linger: time.Hour})
	e.do(e.signUp(e.ctx, "acc-a", "A", "tok-a", "secret-a", t0))
	e.do(e.newEndpoint(e.ctx, "ep-a", "acc-a", domain.EndpointSettings{Name: "one", Mode: domain.ModeLog}, t0))
	e.do(e.newInspector(e.ctx, "insp", time.Hour, t0))
	e.do(e.receive(e.ctx, "a-0", "ep-a", domain.AddressEndpoint, "acc-a", request("/0", "zero"), t0))
	before, err := e.views.AccountQuota(e.ctx, "acc-a")
	if err != nil {
		t.Fatal(err)
	}
	inspBefore, err := e.views.Address(e.ctx, "insp")
	if err != nil {
		t.Fatal(err)
	}

	size := func(id string) int64 {
		t.Helper()
		evs, err := e.store.ReadStream(e.ctx, domain.DeliveryStream(id), 0, 1)
		if err != nil || len(evs) != 1 {
			t.Fatalf("read %s: %v", id, err)
		}
		return int64(len(evs[0].Data))
	}
	posA := e.must(e.receive(e.ctx, "a-1", "ep-a", domain.AddressEndpoint, "acc-a", request("/1", "first"), t0))
	e.views.Recorded("ep-a", "acc-a", size("a-1"), posA)
	posI := e.must(e.receive(e.ctx, "i-1", "insp", domain.AddressInspector, "", request("/i", "inspector"), t0))
	e.views.Recorded("insp", "", size("i-1"), posI)
	if e.views.Position() >= posA {
		t.Fatalf("the views applied position %d already: the test needs them behind", posA)
	}

	check := func(when string) {
		t.Helper()
		u, err := e.views.AccountQuota(e.ctx, "acc-a")
		if err != nil || u.StoredBytes != before.StoredBytes+size("a-1") {
			t.Fatalf("%s: account stored bytes %d (%v), want %d", when, u.StoredBytes, err, before.StoredBytes+size("a-1"))
		}
		a, err := e.views.Address(e.ctx, "insp")
		if err != nil || a.StoredBytes != inspBefore.StoredBytes+size("i-1") {
			t.Fatalf("%s: inspector stored bytes %d (%v), want %d", when, a.StoredBytes, err, inspBefore.StoredBytes+size("i-1"))
		}
	}
	check("before the views applied them")
	e.waitFor(e.views, posI)
	check("after the views applied them")
	// Reported again after the views applied it (a slow recorder): ignored.
	e.views.Recorded("ep-a", "acc-a", size("a-1"), posA)
	check("reported again after")
}

// TestUnappliedIsBounded: with the views stalled, the ledger keeps at most
// maxUnapplied deliveries, forgetting the oldest, and its sums stay those
// of what it keeps.
func TestUnappliedIsBounded(t *testing.T) {
	var u unapplied
	for i := range maxUnapplied + 100 {
		u.Recorded("ep", "acc", 10, uint64(i+1))
	}
	if len(u.entries) != maxUnapplied || u.ofAccount("acc") != 10*maxUnapplied || u.ofAddress("ep") != 10*maxUnapplied {
		t.Fatalf("%d entries, account %d, address %d; want %d entries of 10 bytes", len(u.entries), u.ofAccount("acc"), u.ofAddress("ep"), maxUnapplied)
	}
	u.applied(maxUnapplied + 100)
	if len(u.entries) != 0 || len(u.accounts) != 0 || len(u.address) != 0 {
		t.Fatalf("after the views applied everything: %d entries, %d accounts, %d addresses", len(u.entries), len(u.accounts), len(u.address))
	}
}

// TestQuotaNeverCountsLessThanRecorded: while the views apply batch after
// batch, an account's stored bytes as the quotas read them never fall
// below what the recorder has reported: a receipt is counted by the
// ledger until the views' caches count it, never by neither (as it was
// while a batch's commit was under way, when the ledger let go of it
// before the commit).
func TestQuotaNeverCountsLessThanRecorded(t *testing.T) {
	e := newEnv(t, Options{Linger: time.Millisecond})
	e.do(e.signUp(e.ctx, "acc-a", "A", "tok-a", "secret-a", t0))
	e.do(e.newEndpoint(e.ctx, "ep-a", "acc-a", domain.EndpointSettings{Name: "one", Mode: domain.ModeLog}, t0))
	base, err := e.views.AccountQuota(e.ctx, "acc-a")
	if err != nil {
		t.Fatal(err)
	}
	var reported atomic.Int64 // bytes the recorder has reported so far
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("d-%d", i)
			pos, err := e.receive(e.ctx, id, "ep-a", domain.AddressEndpoint, "acc-a", request("/"+id, "body"), t0)
			if err != nil {
				t.Error(err)
				return
			}
			evs, err := e.store.ReadStream(e.ctx, domain.DeliveryStream(id), 0, 1)
			if err != nil || len(evs) != 1 {
				t.Errorf("read %s: %v", id, err)
				return
			}
			e.views.Recorded("ep-a", "acc-a", int64(len(evs[0].Data)), pos)
			reported.Add(int64(len(evs[0].Data)))
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			if reads < 100 {
				t.Fatalf("only %d reads beside the batches", reads)
			}
			return
		default:
		}
		floor := base.StoredBytes + reported.Load()
		u, err := e.views.AccountQuota(e.ctx, "acc-a")
		if err == nil && u.StoredBytes < floor {
			err = fmt.Errorf("read %d: stored bytes %d, less than the %d recorded", reads, u.StoredBytes, floor)
		}
		if err != nil {
			close(stop)
			<-done
			t.Fatal(err)
		}
		reads++
	}
}
