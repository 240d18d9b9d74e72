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
// 96 MiB: a JSON string that goes on. Without a read limit the client held
// all of it (577 MiB for one of 192 MiB); it reads 64 MiB, as Do reads of
// an answer (the agent's socket has agentcli.MaxRelayMessage, 32 MiB).
func TestSubscribeBoundsAMessage(t *testing.T) {
	const size = 96 << 20
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
	// Read whole by the WebSocket's JSON decoder, then weighed, the message
	// raised the heap by 96-112 MiB; now read in pieces weighed as they
	// arrive, dropped at the bound unjoined.
	if most := int64(maxAnswer + 16<<20); grew > most {
		t.Fatalf("one message from the server raised the client's heap by %d MiB (message %d MiB), want at most %d", grew>>20, size>>20, most>>20)
	}
}

// TestDoDecodesNoTreeOfAnAnswer: an error's extensions are decoded only
// up to 1 KiB each, and an extension past that is not copied: 60 MiB of
// "0," in one became 31 M interface values, 16 bytes each plus the
// slice's growth, and then, held raw, was copied whole to be dropped, the
// heap up 181 MiB. Here the values an answer holds are lowered to 1<<18
// and the extension holds as many as that lets through.
func TestDoDecodesNoTreeOfAnAnswer(t *testing.T) {
	lowerCounts(t, 1<<14, 1<<18)
	const n = 1<<18 - 16 // elements: "0," each
	answer := repeated(`{"errors":[{"message":"x","extensions":{"a":[`, "0", n, `]}}]}`)
	url := answeringWith(t, answer)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := New(url, "tok").Do(context.Background(), "{ me{ id } }", nil, nil)
	runtime.ReadMemStats(&after)
	allocated := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("answer of %d KiB; Do returned %v; allocated %d KiB", len(answer)>>10, err, allocated>>10)
	var ae *Error
	if !errors.As(err, &ae) || ae.Message != "x" || len(ae.Extensions) != 0 {
		t.Errorf("Do: %v, want the error with its oversized extension left out", err)
	}
	if most := 3 * int64(len(answer)); allocated > most {
		t.Errorf("an answer of %d KiB allocated %d KiB, want at most %d", len(answer)>>10, allocated>>10, most>>10)
	}
}

// TestDoBoundsAnAnswer: a server (anyone answering --server URL) sends an
// answer of 128 MiB, one JSON string that goes on, with its length
// (declared) or without it (chunked). Do reads no more than 64 MiB of it
// (maxAnswer): one whose length is past the bound not at all, another up
// to the bound, in pieces weighed as they arrive and dropped unjoined;
// then it fails naming the server as no relay, and the connection is
// dropped: the server could write at most the bound and what the sockets
// buffer. Read whole to be weighed, the chunked answer raised the heap by
// 129 MiB, the bound and a copy of it; now by the bound alone.
func TestDoBoundsAnAnswer(t *testing.T) {
	const size = 128 << 20
	for _, declared := range []bool{false, true} {
		var written atomic.Int64
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if declared {
				w.Header().Set("Content-Length", strconv.Itoa(size+len(`{"data":{"a":""}}`)))
			}
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
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		stop := make(chan struct{})
		peak := peakHeap(stop)
		err := New(srv.URL, "tok").Do(context.Background(), "{ me{ id } }", nil, nil)
		close(stop)
		srv.Close() // waits for the handler: written is final
		grew := int64(peak.Load()) - int64(base.HeapInuse)
		t.Logf("answer of %d MiB, length declared %v: Do returned %v; the server wrote %d MiB; heap grew %d MiB", size>>20, declared, err, written.Load()>>20, grew>>20)
		var notRelay *NotRelayError
		if !errors.As(err, &notRelay) || !strings.Contains(err.Error(), "over 64 MiB") {
			t.Errorf("Do: %v, want the server named as no relay for an answer over 64 MiB", err)
		}
		if w, most := written.Load(), maxAnswer+socketBuffers(t)+1<<20; w > most {
			t.Errorf("the server wrote %d MiB of one answer, want at most %d MiB: %d MiB and what the sockets buffer", w>>20, most>>20, maxAnswer>>20)
		}
		if most := int64(maxAnswer + 16<<20); grew > most {
			t.Errorf("one answer of %d MiB raised the client's heap by %d MiB, want at most %d", size>>20, grew>>20, most>>20)
		}
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
