package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReplayBoundsBytesInFlight: the requests being sent hold at most
// the replay's byte budget, however high --concurrency is; the rest wait
// their turn, and every one is still sent whole and printed in order.
// Before, each of --concurrency requests held its decoded body, so 64
// lines near MaxLine held about 1.5 GiB. Scaled down here: 24 requests
// of 1 MiB with --concurrency 24 and a budget of 4 MiB, against a server
// that holds every answer until the test has measured the heap.
func TestReplayBoundsBytesInFlight(t *testing.T) {
	const (
		lines  = 24
		body   = 1 << 20
		budget = 4 << 20
	)
	bodyOf := func(i int) byte { return byte('a' + i%26) }
	path := filepath.Join(t.TempDir(), "big.bundle")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, `{"relay_bundle":1,"address":"a","url":"http://a.localhost/","exportedAt":"2026-01-02T03:04:05Z","creator":"relay test"}`)
	lineLen := 0
	for i := range lines {
		line := fmt.Sprintf(`{"id":"d%02d","method":"POST","path":"/p%02d","headers":[{"name":"Content-Length","value":"%d"}],"bodyBase64":"%s","complete":true}`,
			i, i, body, base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{bodyOf(i)}, body)))
		lineLen = len(line)
		fmt.Fprintln(w, line)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// The server reads each request whole, checks its body (without
	// holding it, which the heap would count), and answers only once
	// release is closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	arrived := make(chan error, lines)
	release := make(chan struct{})
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil {
					arrived <- err
					return
				}
				var i int
				if _, err := fmt.Sscanf(req.URL.Path, "/p%d", &i); err != nil {
					arrived <- fmt.Errorf("path %q: %w", req.URL.Path, err)
					return
				}
				arrived <- sameBody(req.Body, bodyOf(i), body)
				<-release
				io.WriteString(conn, "HTTP/1.1 204 No Content\r\n\r\n")
			}()
		}
	}()

	target, err := ParseTarget("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	var out bytes.Buffer
	p := Replayer{Target: target, Timeout: 5 * time.Minute, Concurrency: lines, Stdout: &out,
		InFlightBytes: budget,
		onBudgetWait: func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background(), path, nil) }()

	// Measure once the replay can put no more in flight: it waits for the
	// budget, or every request is at the server.
	held := 0
wait:
	for {
		select {
		case err := <-arrived:
			if err != nil {
				t.Fatal(err)
			}
			if held++; held == lines {
				break wait
			}
		case <-waiting:
			break wait
		case err := <-done:
			t.Fatalf("replay ended with every answer held: %v", err)
		}
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	live := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	close(release)
	// The budget, and what the reader holds: its blocks and buffer (twice
	// a line) and the request it decoded last, waiting for its turn.
	limit := int64(budget + 4*lineLen + 1<<20)
	t.Logf("%d requests of %d KiB (lines of %d KiB), --concurrency %d, budget %d MiB: %d at the server, heap up %.1f MiB (bound %.1f MiB)",
		lines, body>>10, lineLen>>10, lines, budget>>20, held, float64(live)/(1<<20), float64(limit)/(1<<20))
	if live > limit {
		t.Errorf("requests in flight raised the heap by %.1f MiB, want at most %.1f MiB", float64(live)/(1<<20), float64(limit)/(1<<20))
	}

	if err := <-done; err != nil {
		t.Fatalf("replay: %v", err)
	}
	for held < lines {
		if err := <-arrived; err != nil {
			t.Fatal(err)
		}
		held++
	}
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "POST /p%02d → 204  delivery d%02d\n", i, i)
	}
	fmt.Fprintf(&want, "%d sent, 0 skipped, 0 without an answer\n", lines)
	if out.String() != want.String() {
		t.Errorf("replay printed\n%s\nwant\n%s", out.String(), want.String())
	}
}

// sameBody reads r to its end and says whether it was n bytes of c.
func sameBody(r io.Reader, c byte, n int) error {
	buf := make([]byte, 32<<10)
	read := 0
	for {
		k, err := r.Read(buf)
		for _, b := range buf[:k] {
			if b != c {
				return fmt.Errorf("byte %d of the body is %q, not %q", read, b, c)
			}
			read++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read the body: %w", err)
		}
	}
	if read != n {
		return fmt.Errorf("a body of %d bytes, want %d", read, n)
	}
	return nil
}
