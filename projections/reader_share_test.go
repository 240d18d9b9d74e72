package projections

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/readmodel"
)

// TestOneReaderHoldsPartOfTheReaders: one account's reads, each holding a
// connection of the reader pool as a long page or stats read holds it,
// take at most readerShare of its readerConns connections, the account's
// other reads waiting for its own to end; another account's read gets a
// connection at once and answers ahead of them. The relay's own reads
// (no reader) take no share.
func TestOneReaderHoldsPartOfTheReaders(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.receiveAnswered(e.ctx, "bob-1", "ep-bob", domain.AddressEndpoint, "bob", request("/b", `{}`), 204, t0))
	e.sync(e.views)
	v := e.views

	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout) // a hang fails instead
	defer cancel()
	const ann = "account:ann"
	annCtx := readmodel.WithReader(ctx, ann)
	const reads = 2 * readerConns
	reading := make(chan struct{}) // closed: ann's reads end
	var wg sync.WaitGroup
	defer func() {
		close(reading)
		wg.Wait()
	}()
	for range reads {
		wg.Go(func() {
			tx, err := v.r.BeginTx(annCtx, nil)
			if err != nil {
				return
			}
			<-reading
			_ = tx.Rollback()
		})
	}
	// Each of ann's reads holds a connection or waits: for ann's share, or
	// (without shares) in the pool's queue.
	testwait.CheckFor(t, waitTimeout, time.Millisecond, func() error {
		st := v.ReaderStats()
		if held, waiting := st.InUse, v.r.shares.Waiting(ann)+int(st.WaitCount); held+waiting != reads {
			return fmt.Errorf("%d of ann's %d reads hold a reader and %d wait", held, reads, waiting)
		}
		return nil
	})
	st := v.ReaderStats()
	if st.InUse > readerShare || st.WaitCount != 0 {
		t.Fatalf("ann's %d reads hold %d of the %d readers, %d queued in the pool: every other account's read waits behind them",
			reads, st.InUse, readerConns, st.WaitCount)
	}

	bob := readmodel.WithReader(ctx, "account:bob")
	p, err := v.DeliverySummaries(bob, "ep-bob", 10, "")
	if err != nil || len(p.Items) != 1 || p.Items[0].ID != "bob-1" {
		t.Fatalf("bob's page: %+v, %v", p, err)
	}
	if got := v.ReaderStats().WaitCount; got != 0 {
		t.Errorf("bob's page queued %d times for a reader, want none", got)
	}
	// The relay's own read names no reader: it is not held to ann's share.
	if _, err := v.DeliverySummary(ctx, "bob-1"); err != nil {
		t.Fatalf("the relay's own read: %v", err)
	}
	if n := v.r.shares.Waiting(ann); n != reads-readerShare {
		t.Errorf("%d of ann's reads wait for ann's share, want %d", n, reads-readerShare)
	}
}

// BenchmarkReaderShare measures what a reader's share adds to a read: the
// same reads as the relay's own (no reader: the ingress's look-up, the
// queue driver) and as a reader's (an API caller's, taking and giving
// back a turn of its share). Compare with BenchmarkAddress and
// BenchmarkReads, which read as the relay.
func BenchmarkReaderShare(b *testing.B) {
	s := newSynth(b, []byte("{}"))
	v := s.open("views.db")
	s.queue(domain.EndpointStream("ep-0"), domain.EndpointCreated{EndpointID: "ep-0", AccountID: "acct-1",
		Name: "hooks", Mode: domain.ModeProxy, Target: "http://127.0.0.1:9/", ResponseCapture: true})
	applyTB(b, v, s.batch(256))
	for _, as := range []struct {
		name string
		ctx  context.Context
	}{
		{"relay", b.Context()},
		{"reader", readmodel.WithReader(b.Context(), "account:acct-1")},
	} {
		ctx := as.ctx
		// The share alone: what every read of the reader pool adds.
		b.Run("share/"+as.name, func(b *testing.B) {
			for b.Loop() {
				release, err := v.r.take(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if release != nil {
					release()
				}
			}
		})
		b.Run("Address/"+as.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Address(ctx, "ep-0"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("DeliverySummary/"+as.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.DeliverySummary(ctx, "d-00000100"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("DeliverySummaries/"+as.name, func(b *testing.B) {
			for b.Loop() {
				if p, err := v.DeliverySummaries(ctx, "ep-0", 20, ""); err != nil || len(p.Items) != 20 {
					b.Fatal(len(p.Items), err)
				}
			}
		})
		b.Run("Endpoints/"+as.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := v.Endpoints(ctx, "acct-1", "", 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
