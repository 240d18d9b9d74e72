package replay

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/bundle"
)

// answerServer answers every request on 127.0.0.1 with what answer
// writes, counting the bytes it wrote.
func answerServer(t *testing.T, answer func(w *bufio.Writer) error) (Target, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var sent atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				w := bufio.NewWriterSize(countWriter{conn, &sent}, 64<<10)
				if answer(w) == nil {
					_ = w.Flush()
				}
			}()
		}
	}()
	target, err := ParseTarget("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return target, &sent
}

type countWriter struct {
	w net.Conn
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestAnswersReadAreBounded: replay reads of a target's answer its status
// line and headers up to maxAnswerHead (1 MiB) and at most maxInterim
// interim (1xx) answers before it; past either the request gets an error
// that names the bound, the connection closed. Before, a target's headers
// were read and held whole (256 MiB of them, as many as it sent), and
// interim answers without end.
func TestAnswersReadAreBounded(t *testing.T) {
	req, err := bundle.ParseLine([]byte(`{"id":"d1","method":"GET","path":"/","headers":[],"bodyBase64":"","bodySize":0,"complete":true}`))
	if err != nil {
		t.Fatal(err)
	}
	const total = 256 << 20
	header := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
	for _, tt := range []struct {
		name, want string
		answer     func(w *bufio.Writer) error
	}{
		{"endless headers", "over 1 MiB", func(w *bufio.Writer) error {
			w.WriteString("HTTP/1.1 200 OK\r\n")
			for n := 0; n < total; n += len(header) {
				if _, err := w.WriteString(header); err != nil {
					return err
				}
			}
			_, err := w.WriteString("Content-Length: 0\r\n\r\n")
			return err
		}},
		{"endless interim answers", "interim", func(w *bufio.Writer) error {
			for range 100_000 {
				if _, err := w.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
					return err
				}
			}
			_, err := w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target, sent := answerServer(t, tt.answer)
			p := Replayer{Target: target, Timeout: 20 * time.Second}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			status, err := p.send(context.Background(), req)
			runtime.ReadMemStats(&after)
			grew := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("send = %d, %v; want an error naming %q", status, err, tt.want)
			}
			if grew > 8 {
				t.Errorf("reading the answer allocated %.1f MiB, want at most 8", grew)
			}
			t.Logf("%v; allocated %.1f MiB, the target sent %.1f MiB", err, grew, float64(sent.Load())/(1<<20))
		})
	}
	// An answer within the bounds is read as before.
	target, _ := answerServer(t, func(w *bufio.Writer) error {
		w.WriteString(strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInterim) + "HTTP/1.1 201 Created\r\n")
		w.WriteString(strings.Repeat(header, 900))
		_, err := w.WriteString("Content-Length: 3\r\n\r\nok\n")
		return err
	})
	if status, err := (Replayer{Target: target, Timeout: 20 * time.Second}).send(context.Background(), req); status != 201 || err != nil {
		t.Errorf("send = %d, %v; want 201", status, err)
	}
}
