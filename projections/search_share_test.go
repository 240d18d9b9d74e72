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

// TestOneSearcherHoldsPartOfTheSearchPool: one account's filtered pages,
// each holding a connection of the search pool as a walk of 100 000
// deliveries holds it, take at most searchShare of its searchConns
// connections, the account's other pages waiting for its own to end;
// another account's page gets a connection and answers ahead of them.
func TestOneSearcherHoldsPartOfTheSearchPool(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.receiveAnswered(e.ctx, "bob-1", "ep-bob", domain.AddressEndpoint, "bob", request("/b", `{}`), 204, t0))
	e.sync(e.views)
	v := e.views

	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout) // a hang fails instead
	defer cancel()
	const ann = "account:ann"
	annCtx := readmodel.WithReader(ctx, ann)
	const pages = searchConns + 1
	walking := make(chan struct{}) // closed: ann's pages end their walks
	var wg sync.WaitGroup
	defer func() {
		close(walking)
		wg.Wait()
	}()
	for range pages {
		wg.Go(func() {
			_, done, err := v.searchTx(annCtx)
			if err != nil {
				return
			}
			<-walking
			done()
		})
	}
	// Each of ann's pages holds a connection or waits for one.
	testwait.CheckFor(t, waitTimeout, time.Millisecond, func() error {
		if held, waiting := v.sr.Stats().InUse, v.srShares.Waiting(ann); held+waiting != pages {
			return fmt.Errorf("%d of ann's %d pages hold a search connection and %d wait for ann's share", held, pages, waiting)
		}
		return nil
	})
	held, waiting := v.sr.Stats().InUse, v.srShares.Waiting(ann)
	if held >= searchConns {
		t.Fatalf("ann's pages hold %d of the search pool's %d connections: every other account's page waits behind them", held, searchConns)
	}

	bob := readmodel.WithReader(ctx, "account:bob")
	p, err := v.SearchDeliveries(bob, "ep-bob", 10, "", readmodel.DeliveryFilter{Method: "POST"}, false)
	if err != nil || len(p.Items) != 1 || p.Items[0].ID != "bob-1" {
		t.Fatalf("bob's filtered page: %+v, %v", p, err)
	}
	if now := v.srShares.Waiting(ann); now != waiting {
		t.Errorf("bob's page answered with %d of ann's pages waiting, want the %d that waited before it: it goes in ahead of them", now, waiting)
	}
}
