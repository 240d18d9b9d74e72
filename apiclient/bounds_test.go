package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/gqlws"
)

// peakHeap samples the heap until stop is closed.
func peakHeap(stop <-chan struct{}) *atomic.Uint64 {
	var peak atomic.Uint64
	go func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return &peak
}

// TestSubscribeBoundsAMessage: a hostile server (or anyone answering
// `relay deliveries tail --server URL`) sends one WebSocket message of
// 192 MiB: a JSON string that goes on. The client holds all of it: Subscribe
// sets no read limit (the agent's socket has agentcli.MaxRelayMessage,
// 32 MiB; Do reads at most 64 MiB).
func TestSubscribeBoundsAMessage(t *testing.T) {
	const size = 192 << 20
	up := websocket.Upgrader{Subprotocols: []string{gqlws.Subprotocol}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		wr, err := c.NextWriter(websocket.TextMessage)
		if err != nil {
			return
		}
		_, _ = wr.Write([]byte(`{"type":"next","id":"1","payload":{"data":"`))
		chunk := []byte(strings.Repeat("a", 1<<20))
		for range size >> 20 {
			if _, err := wr.Write(chunk); err != nil {
				return
			}
		}
		_, _ = wr.Write([]byte(`"}}`))
		_ = wr.Close()
		time.Sleep(time.Second)
	}))
	defer srv.Close()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	peak := peakHeap(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := 0
	err := New(srv.URL, "tok").Subscribe(ctx, "subscription{ x }", nil, func(d json.RawMessage) error {
		got = len(d)
		return context.Canceled
	})
	close(stop)
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("client took a %d-byte message (%v); heap grew %d MiB", got, err, grew>>20)
	if got != 0 || err == nil {
		t.Errorf("Subscribe took a message of %d bytes (error %v), want it refused past %d MiB", got, err, maxAnswer>>20)
	}
	if grew > 3*maxAnswer {
		t.Fatalf("one message from the server raised the client's heap by %d MiB (message %d MiB): no read limit", grew>>20, size>>20)
	}
}

// TestDoDecodesNoTreeOfAnAnswer: Do reads at most 64 MiB, but
// decodes an error's extensions into map[string]any: 60 MiB of "0," in an
// array become 31 M interface values, 16 bytes each plus the slice's
// growth.
func TestDoDecodesNoTreeOfAnAnswer(t *testing.T) {
	const n = 30 << 20 // elements: "0," each
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"errors":[{"message":"x","extensions":{"a":[`))
		chunk := []byte(strings.Repeat("0,", 1<<19))
		for range n >> 19 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`0]}}]}`))
	}))
	defer srv.Close()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	peak := peakHeap(stop)
	err := New(srv.URL, "tok").Do(context.Background(), "{ me{ id } }", nil, nil)
	close(stop)
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("answer of %d MiB; Do returned %v; heap grew %d MiB", (2*n)>>20, err, grew>>20)
	var ae *Error
	if !errors.As(err, &ae) || ae.Message != "x" || len(ae.Extensions) != 0 {
		t.Errorf("Do: %v, want the error with its oversized extension left out", err)
	}
	if grew > 3*maxAnswer {
		t.Fatalf("a 60 MiB answer (within Do's 64 MiB) raised the client's heap by %d MiB", grew>>20)
	}
}

// TestDoBoundsAnAnswer: a server (anyone answering --server URL) sends an
// answer of 128 MiB, one JSON string that goes on. Do reads 64 MiB of it
// (maxAnswer), then fails naming the server as no relay, and the
// connection is dropped: the server could write at most the bound and
// what the sockets buffer.
func TestDoBoundsAnAnswer(t *testing.T) {
	const size = 128 << 20
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":{"a":"`))
		chunk := []byte(strings.Repeat("a", 1<<20))
		for range size >> 20 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = w.Write([]byte(`"}}`))
	}))
	defer srv.Close()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	peak := peakHeap(stop)
	err := New(srv.URL, "tok").Do(context.Background(), "{ me{ id } }", nil, nil)
	close(stop)
	srv.Close() // waits for the handler: written is final
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("answer of %d MiB: Do returned %v; the server wrote %d MiB; heap grew %d MiB", size>>20, err, written.Load()>>20, grew>>20)
	var notRelay *NotRelayError
	if !errors.As(err, &notRelay) {
		t.Errorf("Do: %v, want the server named as no relay", err)
	}
	if w, most := written.Load(), maxAnswer+socketBuffers(t)+1<<20; w > most {
		t.Errorf("the server wrote %d MiB of one answer, want at most %d MiB: %d MiB and what the sockets buffer", w>>20, most>>20, maxAnswer>>20)
	}
	// The decoder's buffer holds the bound, and its earlier, smaller
	// copies wait for the collector (longer under the race detector:
	// 225 MiB there, 113 MiB without it); read whole, the answer raised the
	// heap by 512 MiB.
	if grew > 6*maxAnswer {
		t.Errorf("one answer of %d MiB raised the client's heap by %d MiB", size>>20, grew>>20)
	}
}

// socketBuffers is the most a loopback connection's two sockets buffer
// between a writer and a reader that stopped reading: the largest send
// buffer and the largest receive buffer the kernel autotunes to (Linux's
// tcp_wmem and tcp_rmem maxima: 4 and 32 MiB on some machines, where a
// fixed 16 MiB of slack failed), else 16 MiB.
func socketBuffers(t *testing.T) int64 {
	t.Helper()
	var n int64
	for _, f := range []string{"/proc/sys/net/ipv4/tcp_wmem", "/proc/sys/net/ipv4/tcp_rmem"} {
		b, err := os.ReadFile(f)
		fields := strings.Fields(string(b))
		if err != nil || len(fields) != 3 {
			return 16 << 20
		}
		max, err := strconv.ParseInt(fields[2], 10, 64)
		if err != nil {
			return 16 << 20
		}
		n += max
	}
	return n
}
