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
