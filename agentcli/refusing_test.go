package agentcli

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/gqlws"
)

// TestRefusalsTakeFewGoroutines: forwards refused for the bytes in flight
// are reported by at most maxRefusing goroutines, the rest queued up to
// maxRefusalsQueued and past that told to the Observer as not reported.
// The relay here agrees on an acknowledged subprotocol and never
// acknowledges: each report waits for it. Before, each refusal got a
// goroutine of its own: 2 000 forwards past the bound held 2 000
// goroutines.
func TestRefusalsTakeFewGoroutines(t *testing.T) {
	defer func(n int64) { inFlightBytes = n }(inFlightBytes)
	inFlightBytes = 1 // every forward is past it
	srv := newWSServerOf(t, agentwire.SubprotocolV2)
	const sent = 2000
	obs := &recordingObserver{forwards: make(chan ForwardEvent, sent)}
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		defer close(done)
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Endpoints: []Route{{EndpointID: "ep-1", Target: "127.0.0.1:1"}}})
	}()
	p := srv.accept(t)
	p.handshake("t", "ep-1")

	// What the agent sends is read and dropped; a pong, the answer to
	// the ping sent after the forwards, tells that it has read them all.
	pong := make(chan struct{})
	go func() {
		for {
			typ, data, err := p.conn.ReadMessage()
			if err != nil {
				return
			}
			var m wsMessage
			if typ == websocket.TextMessage && json.Unmarshal(data, &m) == nil && m.Type == gqlws.Pong {
				close(pong)
				return
			}
		}
	}()
	before := runtime.NumGoroutine()
	for i := range sent {
		frame := agentwire.AppendForward(nil, agentwire.Forward{Operation: subscriptionID(0), AttemptID: fmt.Sprintf("att-%d", i), DeliveryID: "del-1",
			Method: "POST", Target: "/" + strings.Repeat("p", 4<<10), Host: "h", Scheme: "https"})
		if err := p.conn.WriteMessage(websocket.BinaryMessage, frame); err != nil {
			t.Fatal(err)
		}
	}
	p.send(wsMessage{Type: gqlws.Ping})
	select {
	case <-pong:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent did not answer the ping sent after the forwards")
	}
	grown := runtime.NumGoroutine() - before
	told := len(obs.forwards)
	t.Logf("%d forwards refused: %d more goroutines, %d told not reported", sent, grown, told)
	if grown > maxRefusing+4 {
		t.Errorf("%d refusals took %d more goroutines, want at most %d", sent, grown, maxRefusing+4)
	}
	if want := sent - maxRefusing - maxRefusalsQueued; told < want {
		t.Errorf("%d forwards told not reported, want at least %d", told, want)
	}
	for range told {
		ev := <-obs.forwards
		if ev.ReportError != ErrRefusalsQueued.Error() || !strings.Contains(ev.Error, "256 MiB of requests in flight") || len(ev.Path) > maxRefusalText {
			t.Fatalf("event %+v, want a forward refused and not reported", ev)
		}
	}
	cancel()
}

// TestQueuedRefusalsAreAllReported: refusals that wait in the queue are
// each reported, once, by the few workers that report them.
func TestQueuedRefusalsAreAllReported(t *testing.T) {
	defer func(n int64) { inFlightBytes = n }(inFlightBytes)
	inFlightBytes = 1
	srv := newWSServerOf(t, agentwire.Subprotocol)
	const sent = maxRefusalsQueued
	obs := &recordingObserver{forwards: make(chan ForwardEvent, sent)}
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	go func() {
		defer close(done)
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Endpoints: []Route{{EndpointID: "ep-1", Target: "127.0.0.1:1"}}})
	}()
	p := srv.accept(t)
	p.handshake("t", "ep-1")
	go func() {
		for i := range sent {
			frame := agentwire.AppendForward(nil, agentwire.Forward{Operation: subscriptionID(0), AttemptID: fmt.Sprintf("att-%d", i), DeliveryID: "del-1",
				Method: "POST", Target: "/", Host: "h", Scheme: "https"})
			if err := p.conn.WriteMessage(websocket.BinaryMessage, frame); err != nil {
				return
			}
		}
	}()
	_ = p.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	reported := map[string]bool{}
	for len(reported) < sent {
		typ, data, err := p.conn.ReadMessage()
		if err != nil {
			t.Fatalf("%d refusals reported: %v", len(reported), err)
		}
		if typ != websocket.BinaryMessage {
			continue
		}
		c, err := agentwire.DecodeComplete(data)
		if err != nil {
			t.Fatal(err)
		}
		if reported[c.AttemptID] || !strings.Contains(c.Error, "256 MiB of requests in flight") {
			t.Fatalf("complete %s: %q (reported before: %v)", c.AttemptID, c.Error, reported[c.AttemptID])
		}
		reported[c.AttemptID] = true
	}
	for range sent {
		select {
		case ev := <-obs.forwards:
			if ev.ReportError != "" {
				t.Errorf("forward %s: report error %q", ev.AttemptID, ev.ReportError)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the Observer was not told of every refused forward")
		}
	}
}
