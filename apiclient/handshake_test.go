package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// endlessHandshake is a server that answers a WebSocket upgrade with
// 101 and header lines, up to size bytes of them, as fast as they are
// read; it counts what it wrote and the connections it took.
type endlessHandshake struct {
	URL            string
	Wrote, Accepts atomic.Int64
}

// newEndlessHandshake starts one; it stops with t.
func newEndlessHandshake(t *testing.T, size int) *endlessHandshake {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &endlessHandshake{URL: "http://" + ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.Accepts.Add(1)
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				if _, err := c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")); err != nil {
					return
				}
				line := []byte(strings.Repeat("X-A: a\r\n", 8<<10))
				for written := 0; written < size; written += len(line) {
					if _, err := c.Write(line); err != nil {
						return
					}
					s.Wrote.Add(int64(len(line)))
				}
				time.Sleep(30 * time.Second)
			}()
		}
	}()
	return s
}

// TestSubscribeBoundsTheHandshake: the answer to a subscription's
// WebSocket upgrade is read up to MaxHandshake bytes; past it the dial
// fails naming the bound. Before, http.ReadResponse kept header lines
// without end: 64 MiB of them were read whole.
func TestSubscribeBoundsTheHandshake(t *testing.T) {
	srv := newEndlessHandshake(t, 64<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := New(srv.URL, "t").Subscribe(ctx, "subscription{ x }", nil, func(json.RawMessage) error { return nil })
	runtime.ReadMemStats(&after)
	n := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	t.Logf("%v; the server wrote %.1f MiB, the client allocated %.1f MiB", err, float64(srv.Wrote.Load())/(1<<20), n)
	var tooLarge *HandshakeTooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Errorf("Subscribe = %v, want the handshake refused past 1 MiB", err)
	}
	if n > 16 {
		t.Errorf("the handshake allocated %.1f MiB, want at most 16", n)
	}
}
