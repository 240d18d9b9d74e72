package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// TestLiveRowsReadInTheirOwnersShare: the rows an account's deliveries
// subscriptions are sent as its deliveries arrive are read from the log
// within the account's share of the log's reads (3 of the embedded log's
// 4 connections), as its operations' reads are, so that another account's
// ordinary read finds a connection while they wait. Here the log is held:
// a read of one of ann's new deliveries holds one of 4 connections until
// released. Before, a live row was the relay's own read, in no one's
// share: ann's 8 Endpoints' subscriptions held all 4 connections with 8
// reads of her deliveries, and bob's delivery(id) waited for them.
func TestLiveRowsReadInTheirOwnersShare(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	const endpoints = 8
	ann := e.accountWithEndpoint(t, `{name: "p0", mode: PROXY, target: "127.0.0.1:3000"}`)
	addresses := []string{ann.endpoint}
	for i := 1; i < endpoints; i++ {
		var ep struct{ CreateEndpoint struct{ ID string } }
		e.c.MustPost(fmt.Sprintf(`mutation { createEndpoint(input: {name: "p%d", mode: PROXY, target: "127.0.0.1:3000"}) { id } }`, i), &ep, ann.auth)
		addresses = append(addresses, ep.CreateEndpoint.ID)
	}
	bob := e.accountWithEndpoint(t, `{name: "b", mode: PROXY, target: "127.0.0.1:3000"}`)
	e.receive(t, "bob-1", bob.endpoint, domain.AddressEndpoint, bob.id, true)

	// One socket of ann's subscribes to each of her Endpoints' deliveries
	// with their bodies; got counts the rows each delivery id reached.
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	for _, address := range addresses {
		c := dialWS(t, srv.URL, map[string]any{"Authorization": "Bearer " + ann.token})
		if err := c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
			"query":     `subscription($a: ID!) { deliveries(address: $a) { id body } }`,
			"variables": map[string]any{"a": address}}}); err != nil {
			t.Fatal(err)
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
				switch m.Type {
				case "ping":
					_ = c.WriteJSON(map[string]string{"type": "pong"})
				case "next":
					var p struct {
						Data *struct{ Deliveries struct{ ID string } }
					}
					if json.Unmarshal(m.Payload, &p) == nil && p.Data != nil {
						mu.Lock()
						got[p.Data.Deliveries.ID]++
						mu.Unlock()
					}
				}
			}
		}()
	}
	rows := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[id]
	}
	// The subscriptions register on their own goroutines: each Endpoint
	// is sent deliveries until one reaches its subscription.
	for i, address := range addresses {
		warm := ""
		testwait.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
			if warm != "" && rows(warm) == 1 {
				return nil
			}
			warm = fmt.Sprintf("warm-%d-%d", i, time.Now().UnixNano())
			e.receive(t, warm, address, domain.AddressEndpoint, ann.id, true)
			return fmt.Errorf("the subscription of %s is not registered yet", address)
		})
	}

	// The log's 4 connections: a read of one of ann's new deliveries holds
	// one until released, any other read takes one while it reads.
	conns := make(chan struct{}, 4)
	release := make(chan struct{})
	held := map[string]bool{}
	for i := range addresses {
		held[domain.DeliveryStream(fmt.Sprintf("ann-%d", i))] = true
	}
	var (
		inMu      sync.Mutex
		in, most  int
		releaseMu sync.Once
	)
	free := func() { releaseMu.Do(func() { close(release) }) }
	t.Cleanup(free)
	gate := func(stream string) func() {
		conns <- struct{}{}
		if held[stream] {
			inMu.Lock()
			in++
			most = max(most, in)
			inMu.Unlock()
			<-release
		}
		return func() { <-conns }
	}
	e.viewsReads.gate.Store(&gate)
	t.Cleanup(func() { e.viewsReads.gate.Store(nil) })

	for i, address := range addresses {
		e.receive(t, fmt.Sprintf("ann-%d", i), address, domain.AddressEndpoint, ann.id, true)
	}
	testwait.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		inMu.Lock()
		defer inMu.Unlock()
		if in < 3 {
			return fmt.Errorf("%d of ann's live rows are in the log", in)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // for more to come, if they may

	answered := make(chan error, 1)
	go func() {
		var out struct{ Delivery struct{ Body string } }
		answered <- e.c.Post(`{ delivery(id: "bob-1") { body } }`, &out, bob.auth)
	}()
	var bobErr error
	bobAnswered := false
	select {
	case bobErr = <-answered:
		bobAnswered = true
	case <-time.After(5 * time.Second):
	}
	inMu.Lock()
	annIn := most
	inMu.Unlock()
	free()
	t.Logf("ann's live rows held %d of the log's 4 connections at once; bob's read answered while they were held: %v", annIn, bobAnswered)
	if annIn > 3 {
		t.Errorf("ann's live rows held %d of the log's 4 connections at once, want at most her share of 3", annIn)
	}
	if !bobAnswered {
		t.Errorf("bob's delivery(id) waited 5 s for a connection of the log held by ann's live rows")
	} else if bobErr != nil {
		t.Errorf("bob's delivery(id): %v", bobErr)
	}
	// Released, every live row reaches its subscription.
	for i := range addresses {
		id := fmt.Sprintf("ann-%d", i)
		testwait.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
			if rows(id) != 1 {
				return fmt.Errorf("%s reached %d subscriptions, want 1", id, rows(id))
			}
			return nil
		})
	}
}
