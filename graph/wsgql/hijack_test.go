package wsgql

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// writesConn records each write that reaches the socket, and passes it
// on to the connection below when there is one.
type writesConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	if c.Conn == nil {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *writesConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// hijackPipe is a ResponseWriter whose connection is one end of a pipe:
// gorilla's upgrader takes it as it takes a server's.
type hijackPipe struct {
	httptest.ResponseRecorder
	conn net.Conn
}

func (h *hijackPipe) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return h.conn, bufio.NewReadWriter(bufio.NewReader(h.conn), bufio.NewWriter(h.conn)), nil
}

// TestWriterSendsQueuedMessagesInOneWrite: messages the socket's writer
// finds queued together reach the connection in one write, each a frame a
// client reads as sent.
func TestWriterSendsQueuedMessagesInOneWrite(t *testing.T) {
	client, server := net.Pipe()
	below := &writesConn{Conn: server}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	cw := &corkingWriter{ResponseWriter: &hijackPipe{conn: below}}
	handshake := make(chan error, 1)
	go func() { // the pipe delivers the 101 only as the client reads it
		_, err := http.ReadResponse(bufio.NewReader(client), r)
		handshake <- err
	}()
	ws, err := (&websocket.Upgrader{}).Upgrade(cw, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-handshake; err != nil {
		t.Fatal(err)
	}
	tr := New(Config{KeepAlive: time.Minute})
	c := &conn{t: tr, ws: ws, cork: cw.conn, wake: make(chan struct{}, 1), room: make(chan struct{}), done: make(chan struct{})}
	sent := []string{"one", "two", "three", "four"}
	for _, m := range sent {
		c.queue = append(c.queue, outgoing{typ: websocket.BinaryMessage, b: []byte(m)})
		c.queued += int64(len(m))
	}
	before := below.count()
	c.wake <- struct{}{}
	go c.writeLoop()
	defer close(c.done)

	reader := bufio.NewReader(client)
	for _, want := range sent {
		// A server frame of a short binary message: 0x82, its length, its bytes.
		head := make([]byte, 2)
		if _, err := io.ReadFull(reader, head); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, head[1])
		if _, err := io.ReadFull(reader, got); err != nil {
			t.Fatal(err)
		}
		if head[0] != 0x82 || string(got) != want {
			t.Fatalf("frame %#x %q, want a binary frame %q", head[0], got, want)
		}
	}
	if n := below.count() - before; n != 1 {
		t.Errorf("%d messages queued together took %d writes, want 1", len(sent), n)
	}
}
