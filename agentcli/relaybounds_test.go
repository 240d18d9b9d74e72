package agentcli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/binwire"
)

// forwardFrame is a forward frame declaring n headers, each the name "a"
// and an empty value (three bytes), built without holding them decoded.
func forwardFrame(n int) []byte {
	w := binwire.Writer{B: make([]byte, 0, 64+3*n)}
	w.Byte(agentwire.KindForward)
	for _, s := range []string{"s0", "att-1", "dlv-1", "POST", "/"} {
		w.Str(s)
	}
	w.Uint(uint64(n))
	for range n {
		w.B = append(w.B, 1, 'a', 0)
	}
	w.Bytes(nil)
	for _, s := range []string{"h", "https", "1.2.3.4"} {
		w.Str(s)
	}
	return w.B
}

// TestForwardHeadersAreBounded: a forward frame of more than
// MaxForwardHeaders headers is refused before it is decoded, naming the
// count and the bound. Before, a frame of MaxRelayMessage declared 11 M
// three-byte headers, each a 32-byte domain.Header decoded: about 390 MiB
// allocated for 32 MiB read. A frame at the bound decodes; a relay forwards
// at most ingress.MaxHeaderLines and an edit's headers.
func TestForwardHeadersAreBounded(t *testing.T) {
	if ingress.MaxHeaderLines+100+16 > MaxForwardHeaders {
		t.Fatalf("MaxForwardHeaders %d is below what a relay forwards (%d lines, 100 set by an edit)", MaxForwardHeaders, ingress.MaxHeaderLines)
	}
	frame := forwardFrame((MaxRelayMessage - 64) / 3)
	var err error
	n := allocated(func() { _, err = decodeForward(frame) })
	t.Logf("a %.1f MiB frame: %v; allocated %.1f MiB", float64(len(frame))/(1<<20), err, float64(n)/(1<<20))
	var tooMany *TooManyHeadersError
	if !errors.As(err, &tooMany) || !strings.Contains(err.Error(), "more than the 8192") {
		t.Errorf("decodeForward = %v, want the frame refused for its headers", err)
	}
	if n > 1<<20 {
		t.Errorf("refusing the frame allocated %.1f MiB, want at most 1", float64(n)/(1<<20))
	}
	f, err := decodeForward(forwardFrame(MaxForwardHeaders))
	if err != nil || len(f.Headers) != MaxForwardHeaders || f.RemoteAddr != "1.2.3.4" {
		t.Errorf("a frame of MaxForwardHeaders headers: %d decoded, %v", len(f.Headers), err)
	}

	// On plain GraphQL, the same bound before the request is sent on.
	fr := forwardRequest{Method: "POST", Path: "/", Headers: make([]wireHeader, MaxForwardHeaders+1)}
	if _, err := fr.local(); !errors.As(err, &tooMany) {
		t.Errorf("local() of %d headers = %v, want refused", MaxForwardHeaders+1, err)
	}
	fr.Headers = fr.Headers[:MaxForwardHeaders]
	for i := range fr.Headers {
		fr.Headers[i].Name = "a"
	}
	if req, err := fr.local(); err != nil || len(req.Headers) != MaxForwardHeaders {
		t.Errorf("local() of %d headers = %v", MaxForwardHeaders, err)
	}
}

// repeated is prefix, n copies of elem separated by commas, and suffix.
func repeated(prefix, elem string, n int, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n*(len(elem)+1) + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// TestTextMessagesAreWeighed: a text message of the relay is weighed by
// what it decodes into before it is decoded (apiclient.CheckDecode), as is
// the payload of an error message. Before, 8 MiB of empty headers in a
// forward (40-byte wireHeaders) or of empty errors (40-byte gqlErrors)
// were decoded: a MaxRelayMessage of them four times as much.
func TestTextMessagesAreWeighed(t *testing.T) {
	const n = 8 << 20 / 3
	forward := repeated(`{"id":"s0","type":"next","payload":{"data":{"forwardRequests":{"attemptId":"att-1","headers":[`, "{}", n, `]}}}}`)
	var err error
	a := allocated(func() { _, err = decodeText(forward) })
	t.Logf("a %.1f MiB forward of empty headers: %v; allocated %.1f MiB", float64(len(forward))/(1<<20), err, float64(a)/(1<<20))
	var tooLarge *apiclient.DecodeTooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "decode message: ") {
		t.Errorf("decodeText = %v, want the message refused as too large decoded", err)
	}
	if a > 1<<20 {
		t.Errorf("refusing the message allocated %.1f MiB, want at most 1", float64(a)/(1<<20))
	}

	errs := repeated(`[`, "{}", n, `]`)
	a = allocated(func() { _, err = payloadErrors(errs) })
	t.Logf("a %.1f MiB list of empty errors: %v; allocated %.1f MiB", float64(len(errs))/(1<<20), err, float64(a)/(1<<20))
	if !errors.As(err, &tooLarge) {
		t.Errorf("payloadErrors = %v, want the payload refused as too large decoded", err)
	}
	if a > 1<<20 {
		t.Errorf("refusing the payload allocated %.1f MiB, want at most 1", float64(a)/(1<<20))
	}

	// What a relay sends still decodes: a forward of a 16 MiB body in
	// base64 and 1 000 headers.
	body := strings.Repeat("QUJD", 16<<20/3)
	headers := string(repeated(``, `{"name":"X-Header","value":"some value of a header","valueBase64":null}`, 1000, ``))
	m, err := decodeText([]byte(`{"id":"s0","type":"next","payload":{"data":{"forwardRequests":{"attemptId":"att-1","headers":[` + headers + `],"bodyBase64":"` + body + `"}}}}`))
	if err != nil || m.next == nil || len(m.next.Data.ForwardRequests.Headers) != 1000 || len(m.next.Data.ForwardRequests.BodyBase64) != len(body) {
		t.Errorf("a forward of a 16 MiB body and 1 000 headers: %v", err)
	}
	if errs, err := payloadErrors([]byte(`[{"message":"m","extensions":{"code":"NOT_FOUND"}}]`)); err != nil || errs[0].Extensions.Code != "NOT_FOUND" {
		t.Errorf("payloadErrors of one error = %v, %v", errs, err)
	}
}

// TestAgentBoundsTheHandshake: the relay's answer to the agent's WebSocket
// upgrade is read up to apiclient.MaxHandshake; past it the dial fails and
// the agent dials again. Before, http.ReadResponse kept header lines
// without end, for as long as the handshake's timeout.
func TestAgentBoundsTheHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wrote, accepts atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"))
				line := []byte(strings.Repeat("X-A: a\r\n", 8<<10))
				for range (64 << 20) / len(line) {
					if _, err := c.Write(line); err != nil {
						return
					}
					wrote.Add(int64(len(line)))
				}
				time.Sleep(30 * time.Second)
			}()
		}
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = Serve(ctx, Options{Server: "http://" + ln.Addr().String(), Token: "t", Observer: &recordingObserver{forwards: make(chan ForwardEvent, 4)},
			Endpoints: []Route{{EndpointID: "ep-1", Target: "127.0.0.1:1"}}})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for accepts.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	runtime.ReadMemStats(&after)
	n := float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	t.Logf("%d dials; the relay wrote %.1f MiB of handshake; allocated %.1f MiB", accepts.Load(), float64(wrote.Load())/(1<<20), n)
	if accepts.Load() < 2 {
		t.Errorf("the agent did not dial again within 20 s: it went on reading the handshake (%.1f MiB written)", float64(wrote.Load())/(1<<20))
	}
	if wrote.Load() > 24<<20 {
		t.Errorf("the relay wrote %.1f MiB of handshake, want the agent to stop reading past 1 MiB", float64(wrote.Load())/(1<<20))
	}
	if n > 48 {
		t.Errorf("two handshakes allocated %.1f MiB, want at most 48", n)
	}
}

// TestRequestsInFlightAreBounded: the requests the agent holds while their
// forwards run are bounded by MaxBytesInFlight (lowered here to 8 MiB); a
// forward past it is reported failed at once, naming the bound, and none
// of it is held. Before, a relay's forwards to a local target that does not
// answer were each held whole: 16 of 2 MiB held 32 MiB.
func TestRequestsInFlightAreBounded(t *testing.T) {
	defer func(n int64) { inFlightBytes = n }(inFlightBytes)
	inFlightBytes = 8 << 20
	release := make(chan struct{})
	var got atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Add(1)
		<-release
	}))
	defer target.Close()
	defer close(release)
	srv := newWSServerOf(t, agentwire.Subprotocol)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_ = Serve(ctx, Options{Server: srv.url, Token: "t", Observer: &recordingObserver{forwards: make(chan ForwardEvent, 64)},
			Endpoints: []Route{{EndpointID: "ep-1", Target: strings.TrimPrefix(target.URL, "http://")}}})
	}()
	p := srv.accept(t)
	p.handshake("t", "ep-1")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const sent, size = 16, 2 << 20
	for i := range sent {
		frame := agentwire.AppendForward(nil, agentwire.Forward{Operation: subscriptionID(0), AttemptID: fmt.Sprintf("att-%d", i), DeliveryID: "del-1",
			Method: "POST", Target: "/", Body: bytes.Repeat([]byte{'x'}, size), Host: "h", Scheme: "https"})
		if err := p.conn.WriteMessage(websocket.BinaryMessage, frame); err != nil {
			t.Fatal(err)
		}
	}
	// The forwards past the bound are reported at once.
	_ = p.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	refused := 0
	for refused < sent-3 {
		typ, data, err := p.conn.ReadMessage()
		if err != nil {
			t.Fatalf("%d refusals read: %v", refused, err)
		}
		if typ == websocket.TextMessage {
			continue
		}
		c, err := agentwire.DecodeComplete(data)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Error, "256 MiB of requests in flight") || c.Status != 0 {
			t.Errorf("complete %s: status %d, error %q, want refused naming the bound", c.AttemptID, c.Status, c.Error)
		}
		refused++
	}
	for deadline := time.Now().Add(5 * time.Second); got.Load() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / (1 << 20)
	t.Logf("%d forwards of 2 MiB: %d run, %d refused; the heap holds %.1f MiB more", sent, got.Load(), refused, held)
	if got.Load() != 3 {
		t.Errorf("%d forwards reached the target, want 3 (8 MiB in flight)", got.Load())
	}
	if held > 16 {
		t.Errorf("the agent holds %.1f MiB more with forwards in flight, want at most 16", held)
	}
}
