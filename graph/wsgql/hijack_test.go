package wsgql

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/cork/corktest"
)

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
	below := &corktest.Writes{Conn: server}
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
	before := below.Count()
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
	if n := below.Count() - before; n != 1 {
		t.Errorf("%d messages queued together took %d writes, want 1", len(sent), n)
	}
}
