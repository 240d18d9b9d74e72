package graph_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// rowCounts counts the rows subscriptions received, by delivery id.
type rowCounts struct {
	mu sync.Mutex
	n  map[string]int
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
// address selecting fields (which must include id), and counts the rows
// they receive.
func liveSockets(t *testing.T, url, address, fields string, sockets, perSocket int) *rowCounts {
	t.Helper()
	rows := &rowCounts{n: map[string]int{}}
	query := `subscription($a: ID!) { deliveries(address: $a) { ` + fields + ` } }`
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
				"payload": map[string]any{"query": query, "variables": map[string]any{"a": address}}}
			if err := c.WriteJSON(msg); err != nil {
				t.Fatal(err)
			}
		}
		go func() {
			for {
				var m struct {
					Type    string
					Payload struct {
						Data struct{ Deliveries struct{ ID string } }
					}
				}
				if c.ReadJSON(&m) != nil {
					return
				}
				switch m.Type {
				case "next":
					rows.add(m.Payload.Data.Deliveries.ID)
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
	rows := liveSockets(t, srv.URL, address, "id body headers { name value }", sockets, perSocket)

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
