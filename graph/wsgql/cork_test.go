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

// TestCorkConn: frames written while corked reach the socket in one write
// with the first frame written uncorked (or at flush); a control frame is
// never held; a frame past corkMax sends what is held first, then itself.
func TestCorkConn(t *testing.T) {
	data := func(s string) []byte { return append([]byte{0x82}, s...) }   // FIN, binary
	pong := func(s string) []byte { return append([]byte{0x8a}, s...) }   // FIN, pong
	close_ := func(s string) []byte { return append([]byte{0x88}, s...) } // FIN, close
	big := data(string(bytes.Repeat([]byte("x"), corkMax)))
	for _, tc := range []struct {
		name  string
		steps func(c *corkConn)
		want  [][]byte
	}{
		{"uncorked frames go one by one", func(c *corkConn) {
			c.Write(data("a"))
			c.Write(data("b"))
		}, [][]byte{data("a"), data("b")}},
		{"corked frames go with the next uncorked one", func(c *corkConn) {
			c.cork(true)
			c.Write(data("a"))
			c.Write(data("b"))
			c.cork(false)
			c.Write(data("c"))
		}, [][]byte{append(append(data("a"), data("b")...), data("c")...)}},
		{"flush sends what is held", func(c *corkConn) {
			c.cork(true)
			c.Write(data("a"))
			if err := c.flush(); err != nil {
				t.Fatal(err)
			}
			c.Write(data("b"))
		}, [][]byte{data("a"), data("b")}},
		{"a control frame is never held", func(c *corkConn) {
			c.cork(true)
			c.Write(data("a"))
			c.Write(pong("p"))
			c.Write(close_("bye"))
		}, [][]byte{append(data("a"), pong("p")...), close_("bye")}},
		{"a frame past the bound goes after what is held", func(c *corkConn) {
			c.cork(true)
			c.Write(data("a"))
			c.Write(big)
		}, [][]byte{data("a"), big}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			below := &writesConn{}
			c := &corkConn{Conn: below}
			tc.steps(c)
			if len(below.writes) != len(tc.want) {
				t.Fatalf("%d writes reached the socket, want %d", len(below.writes), len(tc.want))
			}
			for i := range tc.want {
				if !bytes.Equal(below.writes[i], tc.want[i]) {
					t.Errorf("write %d: %d bytes %q…, want %d bytes %q…", i, len(below.writes[i]), below.writes[i][:min(8, len(below.writes[i]))],
						len(tc.want[i]), tc.want[i][:min(8, len(tc.want[i]))])
				}
			}
		})
	}
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
