package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// rowCounts counts the rows subscriptions received, by delivery id, and
// the errors that ended them, by code.
type rowCounts struct {
	mu   sync.Mutex
	n    map[string]int
	errs map[string]int
}

func (r *rowCounts) addErr(code string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[code]++
}

// errors is how many subscriptions ended with an error of code.
func (r *rowCounts) errors(code string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs[code]
}

func (r *rowCounts) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[id]++
}

// of is how many subscriptions received id's row.
func (r *rowCounts) of(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[id]
}

// liveSockets opens sockets × perSocket deliveries subscriptions of
// address selecting fields (which must include id), with since when it
// is not nil, and counts the rows they receive.
func liveSockets(t *testing.T, url, address string, since *string, fields string, sockets, perSocket int) *rowCounts {
	t.Helper()
	rows := &rowCounts{n: map[string]int{}, errs: map[string]int{}}
	query := `subscription($a: ID!, $s: String) { deliveries(address: $a, since: $s) { ` + fields + ` } }`
	vars := map[string]any{"a": address}
	if since != nil {
		vars["s"] = *since
	}
	for range sockets {
		d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
		c, _, err := d.Dial("ws"+strings.TrimPrefix(url, "http")+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		var ack struct{ Type string }
		if err := c.WriteJSON(map[string]any{"type": "connection_init"}); err != nil {
			t.Fatal(err)
		}
		if err := c.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
			t.Fatalf("connection_init: %v %+v", err, ack)
		}
		for i := range perSocket {
			msg := map[string]any{"id": fmt.Sprint(i), "type": "subscribe",
				"payload": map[string]any{"query": query, "variables": vars}}
			if err := c.WriteJSON(msg); err != nil {
				t.Fatal(err)
			}
		}
		go func() {
			for {
				var m struct {
					Type    string
					Payload json.RawMessage
				}
				if c.ReadJSON(&m) != nil {
					return
				}
				// A refusal comes as a next with errors (gqlgen's), an
				// ended subscription as an error message.
				type gqlErrors []struct{ Extensions struct{ Code string } }
				switch m.Type {
				case "next":
					var p struct {
						Data   *struct{ Deliveries struct{ ID string } }
						Errors gqlErrors
					}
					_ = json.Unmarshal(m.Payload, &p)
					for _, e := range p.Errors {
						rows.addErr(e.Extensions.Code)
					}
					if p.Data != nil {
						rows.add(p.Data.Deliveries.ID)
					}
				case "error":
					var errs gqlErrors
					_ = json.Unmarshal(m.Payload, &errs)
					for _, e := range errs {
						rows.addErr(e.Extensions.Code)
					}
				case "ping":
					_ = c.WriteJSON(map[string]string{"type": "pong"})
				}
			}
		}()
	}
	return rows
}

// TestLiveRowsAreReadOncePerChange: a change of a delivery announced to
// many subscriptions of its address is read from the views and the log
// once, not once per subscription, so one client's 100 subscriptions on
// an address cannot turn each request into 100 reads of the views' few
// connections and of the log.
func TestLiveRowsAreReadOncePerChange(t *testing.T) {
	e := newEnv(t)
	var created struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &created)
	address := created.CreateInspector.ID
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	const sockets, perSocket = 4, 25
	const subs = sockets * perSocket
	rows := liveSockets(t, srv.URL, address, nil, "id body headers { name value }", sockets, perSocket)

	// The subscriptions register on their own goroutines: deliveries are
	// sent until one reaches every subscription; only the next is counted.
	warm := ""
	testwait.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if warm != "" && rows.of(warm) == subs {
			return nil
		}
		warm = commands.NewDeliveryID()
		e.receive(t, warm, address, domain.AddressInspector, "", true)
		return fmt.Errorf("not every subscription is registered yet")
	})

	id := commands.NewDeliveryID()
	read := e.viewsReads.during(func() {
		e.receive(t, id, address, domain.AddressInspector, "", true)
		testwait.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
			if n := rows.of(id); n < subs {
				return fmt.Errorf("%d of %d subscriptions got the row", n, subs)
			}
			return nil
		})
	})
	n := 0
	for _, s := range read {
		if s == domain.DeliveryStream(id) {
			n++
		}
	}
	t.Logf("one delivery to %d subscriptions: its request read from the log %d times", subs, n)
	if n != 1 {
		t.Errorf("one delivery to %d subscriptions read its request from the log %d times, want once", subs, n)
	}
}

// heldReplays is the views with each replay's index walk (ChangedSince)
// held open a moment, counting how many run at once.
type heldReplays struct {
	graph.Views
	mu            sync.Mutex
	running, most int
	calls         int
}

func (h *heldReplays) ChangedSince(ctx context.Context, address, since string) ([]string, error) {
	h.mu.Lock()
	h.running++
	h.calls++
	h.most = max(h.most, h.running)
	h.mu.Unlock()
	defer func() { h.mu.Lock(); h.running--; h.mu.Unlock() }()
	// Long enough for the other subscribes to arrive if they may; the
	// test counts, it does not time.
	time.Sleep(10 * time.Millisecond)
	return h.Views.ChangedSince(ctx, address, since)
}

// TestReplaysOfASocketWalkOneAtATime: a client that sends 100 subscribes
// with since at once on one socket gets its replays' index walks run one
// after another, not 100 at once queued on the views' four connections
// ahead of every other reader's.
func TestReplaysOfASocketWalkOneAtATime(t *testing.T) {
	var held *heldReplays
	const subs = 100
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		held = &heldReplays{Views: r.Views}
		r.Views = held
		// Every replay admitted: the client's replay rate has a test of its
		// own (TestDeliveriesReplaysAreAdmittedPerClient).
		r.ReplayRate = ratelimit.Rate{N: subs, Per: time.Minute, Burst: subs}
	})
	var created struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &created)
	address := created.CreateInspector.ID
	for range 3 {
		e.receive(t, commands.NewDeliveryID(), address, domain.AddressInspector, "", true)
	}
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	since := ""
	liveSockets(t, srv.URL, address, &since, "id", 1, subs)
	testwait.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		held.mu.Lock()
		defer held.mu.Unlock()
		if held.calls < subs {
			return fmt.Errorf("%d of %d replays walked", held.calls, subs)
		}
		return nil
	})
	held.mu.Lock()
	defer held.mu.Unlock()
	t.Logf("%d subscribes with since on one socket: at most %d replay walks at once", subs, held.most)
	if held.most != 1 {
		t.Errorf("%d subscribes with since on one socket ran %d replay walks at once, want 1", subs, held.most)
	}
}

// TestDeliveriesSubscriptionsPerAddress: an address serves at most
// MaxWatchersPerAddress deliveries subscriptions at once, as many as its
// smee streams; one more is refused RATE_LIMITED, and another address is
// still served.
func TestDeliveriesSubscriptionsPerAddress(t *testing.T) {
	e := newEnv(t)
	address, other := newInspectorID(t, e), newInspectorID(t, e)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	const want = graph.MaxWatchersPerAddress
	const asked = want + 22 // over two sockets: 100 operations each
	rows := liveSockets(t, srv.URL, address, nil, "id", 2, asked/2)
	otherRows := liveSockets(t, srv.URL, other, nil, "id", 1, 1)

	// Subscriptions register on their own goroutines: deliveries are sent
	// until every subscription either got one or was refused.
	var last string
	testwait.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
		if last != "" && rows.of(last)+rows.errors("RATE_LIMITED") >= asked {
			return nil
		}
		last = commands.NewDeliveryID()
		e.receive(t, last, address, domain.AddressInspector, "", true)
		return fmt.Errorf("not every subscription got a row or was refused yet")
	})
	got, refused := rows.of(last), rows.errors("RATE_LIMITED")
	t.Logf("%d subscriptions of one address: %d live, %d refused", asked, got, refused)
	if got != want || refused != asked-want {
		t.Errorf("%d subscriptions of one address: %d live and %d refused, want %d and %d", asked, got, refused, want, asked-want)
	}
	id := commands.NewDeliveryID()
	e.receive(t, id, other, domain.AddressInspector, "", true)
	testwait.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if otherRows.of(id) != 1 {
			return fmt.Errorf("another address's subscription got no row")
		}
		return nil
	})
}

// newInspectorID creates an inspector and returns its id.
func newInspectorID(t *testing.T, e *env) string {
	t.Helper()
	var created struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &created)
	return created.CreateInspector.ID
}

// behindViews is the views whose every watch is dropped as behind at once.
type behindViews struct{ graph.Views }

func (behindViews) Watch(string) (<-chan readmodel.Change, func()) {
	ch := make(chan readmodel.Change, 1)
	ch <- readmodel.Change{Behind: true}
	close(ch)
	return ch, func() {}
}

// TestFellBehindEndsWithAnError: a subscription whose watch the views
// dropped for falling behind ends with FELL_BEHIND, not a plain complete,
// so the client knows to subscribe again with since.
func TestFellBehindEndsWithAnError(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) { r.Views = behindViews{r.Views} })
	address := newInspectorID(t, e)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	rows := liveSockets(t, srv.URL, address, nil, "id", 1, 1)
	testwait.CheckFor(t, 20*time.Second, 5*time.Millisecond, func() error {
		if rows.errors("FELL_BEHIND") != 1 {
			return fmt.Errorf("no FELL_BEHIND error yet")
		}
		return nil
	})
}
