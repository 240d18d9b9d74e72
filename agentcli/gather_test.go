package agentcli

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/cork"
	"github.com/relayhq/relay/internal/cork/corktest"
	"github.com/relayhq/relay/internal/testwait"
)

// TestCompleteFramesQueuedTogetherGoInOneWrite: Complete frames queued
// while a write is under way reach the socket in one write, each a binary
// message the relay reads whole; the workers that queued them behind the
// first do not wait for the socket.
func TestCompleteFramesQueuedTogetherGoInOneWrite(t *testing.T) {
	srv := newWSServerOf(t, "test")
	var below *corktest.Writes
	var corked *cork.Conn
	d := websocket.Dialer{Subprotocols: []string{"test"},
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			below = &corktest.Writes{Conn: c}
			corked = cork.New(below)
			return corked, nil
		}}
	conn, _, err := d.Dial("ws"+strings.TrimPrefix(srv.url, "http")+"/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	peer := srv.accept(t)
	s := &session{a: &agent{writeTimeout: 10 * time.Second}, conn: conn, cork: corked}

	s.writeMu.Lock() // a write under way
	sent := []string{"one", "two", "three"}
	var first sync.WaitGroup
	first.Add(1)
	go func() {
		defer first.Done()
		b := []byte(sent[0])
		if err := s.sendComplete(&b); err != nil {
			t.Error(err)
		}
	}()
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		s.queueMu.Lock()
		defer s.queueMu.Unlock()
		if len(s.queue) != 1 {
			return errors.New("the first frame is not queued yet")
		}
		return nil
	})
	for _, m := range sent[1:] {
		b := []byte(m)
		if err := s.sendComplete(&b); err != nil { // returns without the socket
			t.Fatal(err)
		}
	}
	before := below.Count()
	s.writeMu.Unlock()
	first.Wait()
	if n := below.Count() - before; n != 1 {
		t.Errorf("%d frames queued together took %d writes, want 1", len(sent), n)
	}
	_ = peer.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, want := range sent {
		typ, got, err := peer.conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if typ != websocket.BinaryMessage || string(got) != want {
			t.Fatalf("read %d %q, want a binary message %q", typ, got, want)
		}
	}
}
