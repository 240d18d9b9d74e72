package projections

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/readmodel"
)

// gatedLog is the real store whose reads of the streams in block wait
// until release is closed, each announcing itself on entered first; every
// read's bytes are counted.
type gatedLog struct {
	domain.EventStore
	block   map[string]bool
	entered chan string
	release chan struct{}
	read    atomic.Int64
}

func (g *gatedLog) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	if g.block[stream] {
		select { // announced until released
		case g.entered <- stream:
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	evs, err := g.EventStore.ReadStream(ctx, stream, from, max)
	for _, e := range evs {
		g.read.Add(int64(len(e.Data)))
	}
	return evs, err
}

// gatedViews opens views over the env's store behind a gatedLog, runs
// them and waits until they hold the whole log.
func gatedViews(e *env, g *gatedLog, opts Options) *Runner {
	e.t.Helper()
	g.EventStore = e.store
	c := *e
	c.store = g
	v := c.open("gated-views.db", opts)
	e.run(v)
	e.sync(v)
	return v
}

// TestSearchHoldsNoViewsConnectionWhileReadingTheLog: with more searches
// of bodies stuck in a log read than the views have connections (readers
// and search pool together), another address's page, delivery and
// searches, of the views and of the log, still answer.
func TestSearchHoldsNoViewsConnectionWhileReadingTheLog(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.receiveAnswered(e.ctx, "noisy-1", "insp-noisy", domain.AddressInspector, "", request("/n", `{"secret":"x"}`), 204, t0))
	e.must(e.receiveAnswered(e.ctx, "quiet-1", "insp-quiet", domain.AddressInspector, "", request("/q", `{"charge":"y"}`), 204, t0))
	e.sync(e.views)
	g := &gatedLog{block: map[string]bool{domain.DeliveryStream("noisy-1"): true}, entered: make(chan string), release: make(chan struct{})}
	v := gatedViews(e, g, Options{})

	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout) // a hang fails instead
	defer cancel()
	const stuck = 4 + searchConns + 2 // the readers, the search pool, and more
	var wg sync.WaitGroup
	errs := make(chan error, stuck)
	for range stuck {
		wg.Go(func() {
			p, err := v.SearchDeliveries(ctx, "insp-noisy", 10, "", readmodel.DeliveryFilter{BodyContains: "secret"}, true)
			if err == nil && (len(p.Items) != 1 || string(p.Items[0].Body) != `{"secret":"x"}`) {
				err = fmt.Errorf("noisy search: %+v", p)
			}
			errs <- err
		})
	}
	for i := range stuck {
		select {
		case <-g.entered:
		case <-ctx.Done():
			t.Fatalf("%d of %d searches reached the log: the others wait for a views connection", i, stuck)
		}
	}

	// Every search is now inside a log read it cannot leave.
	page, err := v.DeliverySummaries(ctx, "insp-quiet", 10, "")
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("quiet page: %+v, %v", page, err)
	}
	if d, err := v.Delivery(ctx, "quiet-1"); err != nil || string(d.Body) != `{"charge":"y"}` {
		t.Fatalf("quiet delivery: %+v, %v", d, err)
	}
	for _, f := range []readmodel.DeliveryFilter{{Method: "POST"}, {BodyContains: "charge"}} {
		p, err := v.SearchDeliveries(ctx, "insp-quiet", 10, "", f, false)
		if err != nil || len(p.Items) != 1 || p.Items[0].ID != "quiet-1" {
			t.Fatalf("quiet search %+v: %+v, %v", f, p, err)
		}
	}
	close(g.release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// TestSearchStopsAtItsByteBudget: a search of bodies reads at most its
// budget of the log per page (and one event past it), says the page was
// cut, and the pages that follow find every match, in order, exactly once.
func TestSearchStopsAtItsByteBudget(t *testing.T) {
	e := newEnv(t, Options{})
	const n, bodySize = 30, 4 << 10
	var want []string
	for i := range n {
		body := strings.Repeat("a", bodySize)
		if i%4 == 0 {
			body = "match" + body[5:]
		}
		id := fmt.Sprintf("d-%02d", i)
		e.must(e.receiveAnswered(e.ctx, id, "insp-a", domain.AddressInspector, "", request("/", body), 204, t0.Add(time.Duration(i)*time.Second)))
		if i%4 == 0 {
			want = append([]string{id}, want...)
		}
	}
	e.sync(e.views)
	const budget = 3 * bodySize
	g := &gatedLog{}
	v := gatedViews(e, g, Options{SearchLogBytes: budget})
	ev, err := e.store.ReadStream(e.ctx, domain.DeliveryStream("d-00"), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	event := int64(len(ev[0].Data))

	var got []string
	after, cuts := "", 0
	for page := 0; ; page++ {
		if page > n {
			t.Fatalf("still paging after %d pages", page)
		}
		g.read.Store(0)
		p, err := v.SearchDeliveries(e.ctx, "insp-a", 10, after, readmodel.DeliveryFilter{BodyContains: "match"}, true)
		if err != nil {
			t.Fatal(err)
		}
		// The page's matches are read again, whole, for the answer.
		if read, limit := g.read.Load(), budget+event+int64(len(p.Items))*event; read > limit {
			t.Fatalf("page %d read %d bytes of the log, budget %d", page, read, budget)
		}
		for _, d := range p.Items {
			if !strings.HasPrefix(string(d.Body), "match") {
				t.Fatalf("page %d: %s without its body", page, d.ID)
			}
			got = append(got, d.ID)
		}
		if p.SearchCut {
			cuts++
			if !p.HasNextPage || p.EndCursor == "" {
				t.Fatalf("page %d is cut but does not continue: %+v", page, p)
			}
		}
		if !p.HasNextPage {
			break
		}
		after = p.EndCursor
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("found %v, want %v", got, want)
	}
	if cuts == 0 {
		t.Fatal("no page was cut by the budget")
	}
	// Without the budget in the way, one page holds them all.
	p, err := e.views.SearchDeliveries(e.ctx, "insp-a", 10, "", readmodel.DeliveryFilter{BodyContains: "match"}, false)
	if err != nil || len(p.Items) != len(want) || p.SearchCut || p.HasNextPage {
		t.Fatalf("default budget: %d items, cut %v, next %v, %v", len(p.Items), p.SearchCut, p.HasNextPage, err)
	}
}

// TestSearchesShareAPaceOfTheLog: all searches of bodies together read the
// log at SearchLogRate, a page's budget at once. With a pace of a byte a
// second, the first page reads its budget; each page after it reads its
// first candidate (always read) and is refused, where it would wait far
// longer than its caller's deadline: five pages read the burst and one
// event each, not five budgets.
func TestSearchesShareAPaceOfTheLog(t *testing.T) {
	e := newEnv(t, Options{})
	const n, pages = 20, 5
	for i := range n {
		e.must(e.receiveAnswered(e.ctx, fmt.Sprintf("d-%02d", i), "insp-a", domain.AddressInspector, "", request("/", strings.Repeat("a", 4<<10)), 204, t0.Add(time.Duration(i)*time.Second)))
	}
	e.sync(e.views)
	ev, err := e.store.ReadStream(e.ctx, domain.DeliveryStream("d-00"), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	event := int64(len(ev[0].Data))
	g := &gatedLog{}
	v := gatedViews(e, g, Options{SearchLogBytes: 4 * event, SearchLogRate: 1})
	g.read.Store(0)
	refused := 0
	for page := range pages {
		ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
		_, err := v.SearchDeliveries(ctx, "insp-a", 10, "", readmodel.DeliveryFilter{BodyContains: "match"}, true)
		cancel()
		switch {
		case page == 0 && err != nil:
			t.Fatalf("the first page, within the burst: %v", err)
		case err != nil:
			refused++
		}
	}
	read := g.read.Load()
	t.Logf("%d pages read %d events of the log; %d refused", pages, read/event, refused)
	if limit := 4*event + (pages-1)*event; read > limit || refused != pages-1 {
		t.Fatalf("%d pages read %d bytes (%d events) of the log, %d refused; want at most %d bytes (the burst and one event a page), %d refused",
			pages, read, read/event, refused, limit, pages-1)
	}
}

// TestOneReaderHoldsPartOfTheLogReads: one account's reads of the log
// (here 8 deliveries read with their bodies at once, each stuck in the
// log) run logReadShare at a time, its others waiting for one of its own
// to end; another account's delivery is read meanwhile. With the share
// lifted all 8 were in the log at once, holding each of the embedded
// log's 4 connections and queuing ahead of everyone else's reads.
func TestOneReaderHoldsPartOfTheLogReads(t *testing.T) {
	e := newEnv(t, Options{})
	const reads = 8
	block := map[string]bool{}
	for i := range reads {
		id := fmt.Sprintf("ann-%d", i)
		e.must(e.receiveAnswered(e.ctx, id, "ep-ann", domain.AddressEndpoint, "ann", request("/a", `{}`), 204, t0))
		block[domain.DeliveryStream(id)] = true
	}
	e.must(e.receiveAnswered(e.ctx, "bob-1", "ep-bob", domain.AddressEndpoint, "bob", request("/b", `{"b":1}`), 204, t0))
	e.sync(e.views)
	g := &gatedLog{block: block, entered: make(chan string, reads), release: make(chan struct{})}
	v := gatedViews(e, g, Options{})

	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout) // a hang fails instead
	defer cancel()
	const ann = "account:ann"
	annCtx := readmodel.WithReader(ctx, ann)
	var wg sync.WaitGroup
	defer func() {
		close(g.release)
		wg.Wait()
	}()
	for i := range reads {
		wg.Go(func() { _, _ = v.Delivery(annCtx, fmt.Sprintf("ann-%d", i)) })
	}
	testwait.CheckFor(t, waitTimeout, time.Millisecond, func() error {
		if in, waiting := len(g.entered), v.logShares.Waiting(ann); in+waiting != reads {
			return fmt.Errorf("%d of ann's %d reads are in the log and %d wait for its share", in, reads, waiting)
		}
		return nil
	})
	// The embedded log reads on 4 connections: one reader holds fewer.
	if in := len(g.entered); in > logReadShare {
		t.Fatalf("%d of ann's reads are in the log at once, want at most %d of the log's 4 connections", in, logReadShare)
	}
	d, err := v.Delivery(readmodel.WithReader(ctx, "account:bob"), "bob-1")
	if err != nil || string(d.Body) != `{"b":1}` {
		t.Fatalf("bob's delivery while ann's reads wait: %q, %v", d.Body, err)
	}
}
