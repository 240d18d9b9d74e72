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

// pipeSocket is a server socket's conn on one end of a pipe, its writes
// recorded below the cork, and a reader of the client's end.
func pipeSocket(t *testing.T, cfg Config) (*conn, *corktest.Writes, *bufio.Reader) {
	t.Helper()
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
	c := &conn{t: New(cfg), ws: ws, cork: cw.conn, wake: make(chan struct{}, 1), room: make(chan struct{}), done: make(chan struct{})}
	// A frame that never comes fails the read, not the whole run.
	if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c, below, bufio.NewReader(client)
}

// readBinary reads one short binary frame a server sent and fails t unless
// it carries want.
func readBinary(t *testing.T, reader *bufio.Reader, want string) {
	t.Helper()
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

// TestWriterSendsQueuedMessagesInOneWrite: messages the socket's writer
// finds queued together reach the connection in one write, each a frame a
// client reads as sent.
func TestWriterSendsQueuedMessagesInOneWrite(t *testing.T) {
	c, below, reader := pipeSocket(t, Config{KeepAlive: time.Minute})
	sent := []string{"one", "two", "three", "four"}
	for _, m := range sent {
		c.queue = append(c.queue, outgoing{typ: websocket.BinaryMessage, b: []byte(m)})
		c.queued += int64(len(m))
	}
	before := below.Count()
	c.wake <- struct{}{}
	go c.writeLoop()
	defer close(c.done)

	for _, want := range sent {
		readBinary(t, reader, want)
	}
	if n := below.Count() - before; n != 1 {
		t.Errorf("%d messages queued together took %d writes, want 1", len(sent), n)
	}
}

// TestLazyReplyWaitsForCompany: a reply queued lazily (BinaryConfig.
// ReplyDelay) does not wake the writer: the next message takes it along,
// both in one write; alone, it goes out once the delay has passed.
func TestLazyReplyWaitsForCompany(t *testing.T) {
	t.Run("with the next message", func(t *testing.T) {
		c, below, reader := pipeSocket(t, Config{KeepAlive: time.Minute, Binary: BinaryConfig{ReplyDelay: time.Hour}})
		before := below.Count()
		if _, err := c.tryQueue(outgoing{typ: websocket.BinaryMessage, b: []byte("done"), lazy: true}); err != nil {
			t.Fatal(err)
		}
		if len(c.wake) != 0 {
			t.Fatal("a lazy reply woke the writer")
		}
		if _, err := c.tryQueue(outgoing{typ: websocket.BinaryMessage, b: []byte("forward")}); err != nil {
			t.Fatal(err)
		}
		go c.writeLoop()
		defer close(c.done)
		readBinary(t, reader, "done")
		readBinary(t, reader, "forward")
		if n := below.Count() - before; n != 1 {
			t.Errorf("the reply and the next message took %d writes, want 1", n)
		}
	})
	t.Run("alone, after the delay", func(t *testing.T) {
		c, _, reader := pipeSocket(t, Config{KeepAlive: time.Minute, Binary: BinaryConfig{ReplyDelay: 5 * time.Millisecond}})
		go c.writeLoop()
		defer close(c.done)
		for _, m := range []string{"first", "second"} { // the timer is set again after it fired
			if _, err := c.tryQueue(outgoing{typ: websocket.BinaryMessage, b: []byte(m), lazy: true}); err != nil {
				t.Fatal(err)
			}
			readBinary(t, reader, m)
		}
	})
}
