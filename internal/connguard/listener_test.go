package connguard

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

func listen(t *testing.T, maxPerIP int, writeTimeout time.Duration) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, maxPerIP, writeTimeout)
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, l *Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestListenerRefusesOverTheCap: the connection over the cap is answered
// 429 with Connection: close and closed, never returned by Accept; closing
// an accepted connection frees its place.
func TestListenerRefusesOverTheCap(t *testing.T) {
	l := listen(t, 1, 0)
	first := dial(t, l)
	accepted, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	if n := l.Open("127.0.0.1"); n != 1 {
		t.Fatalf("open %d, want 1", n)
	}

	second := dial(t, l)
	next := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept() // refuses second, then waits for a third
		if err == nil {
			next <- c
		}
	}()
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(second), nil)
	if err != nil {
		t.Fatalf("over the cap: %v, want a 429", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !resp.Close || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("over the cap: %d close=%v %v", resp.StatusCode, resp.Close, resp.Header)
	}

	first.Close()
	accepted.Close()
	if n := l.Open("127.0.0.1"); n != 0 {
		t.Fatalf("open %d after the close, want 0", n)
	}
	accepted.Close() // a second Close releases nothing more
	dial(t, l)
	select {
	case c := <-next:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("a connection after the close was not accepted")
	}
}

// TestListenerWriteStalls: a write to a client that reads nothing fails
// after the write timeout instead of blocking for good.
func TestListenerWriteStalls(t *testing.T) {
	l := listen(t, 4, 200*time.Millisecond)
	_ = dial(t, l) // never reads
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	chunk := make([]byte, 1<<20)
	for written := 0; written < 1<<30; written += len(chunk) { // far more than socket buffers hold
		if _, err = c.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a client that reads nothing: %v, want deadline exceeded", err)
	}
}
