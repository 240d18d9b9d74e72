package connguard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

const testTimeout = 300 * time.Millisecond

// serve runs h behind BodyProgress(testTimeout) on 127.0.0.1 and returns
// its address.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: BodyProgress(testTimeout, h), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// exchange writes raw on a new connection and reads one answer.
func exchange(t *testing.T, addr string, write func(c net.Conn)) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	write(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(body)))
	return resp
}

func answerBody(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestStalledBodyFails: a body that stops arriving fails the handler's read
// with os.ErrDeadlineExceeded after the timeout.
func TestStalledBodyFails(t *testing.T) {
	addr := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		fmt.Fprint(w, errors.Is(err, os.ErrDeadlineExceeded))
	})
	resp := exchange(t, addr, func(c net.Conn) {
		fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	})
	if got := answerBody(resp); got != "true" {
		t.Fatalf("handler saw deadline exceeded: %s, want true", got)
	}
}

// TestDeadlineLiftedAfterBody: once the body is read, the handler may work
// far longer than the body timeout (a forward does) without its request
// being cancelled, whether it read to EOF or exactly Content-Length bytes,
// and the kept-alive connection serves a second request.
func TestDeadlineLiftedAfterBody(t *testing.T) {
	for _, tt := range []struct {
		name string
		read func(r *http.Request) error
	}{
		{"read to EOF", func(r *http.Request) error { _, err := io.ReadAll(r.Body); return err }},
		{"read exactly the length", func(r *http.Request) error {
			_, err := io.ReadFull(r.Body, make([]byte, r.ContentLength))
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := serve(t, func(w http.ResponseWriter, r *http.Request) {
				if err := tt.read(r); err != nil {
					fmt.Fprintf(w, "read: %v", err)
					return
				}
				select {
				case <-r.Context().Done():
					fmt.Fprintf(w, "cancelled: %v", r.Context().Err())
				case <-time.After(3 * testTimeout): // the handler's own work
					fmt.Fprint(w, "ok")
				}
			})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			for i := range 2 {
				fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				if got := answerBody(resp); got != "ok" {
					t.Fatalf("request %d: handler said %q, want ok", i+1, got)
				}
			}
		})
	}
}

// TestSteadyBodyPasses: a body that keeps arriving succeeds even when it
// takes several times the timeout in all.
func TestSteadyBodyPasses(t *testing.T) {
	addr := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %v", len(b), err)
	})
	resp := exchange(t, addr, func(c net.Conn) {
		fmt.Fprint(c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
		tick := time.NewTicker(testTimeout / 3)
		defer tick.Stop()
		for range 12 { // about four timeouts in all
			<-tick.C // pacing the sender
			fmt.Fprint(c, "4\r\nabcd\r\n")
		}
		fmt.Fprint(c, "0\r\n\r\n")
	})
	if got := answerBody(resp); got != "48 <nil>" {
		t.Fatalf("handler read %q, want 48 bytes and no error", got)
	}
}

// deadlineWriter records the read deadlines set through it.
type deadlineWriter struct {
	http.ResponseWriter
	set []time.Time
}

func (d *deadlineWriter) SetReadDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// wrapped hides its writer's methods but unwraps to it, as a middleware's
// writer does.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestBodyProgressFindsTheConnection: the deadline is set through writers
// that unwrap (as http.ResponseController finds it), and a writer that
// cannot set one leaves the body as it is.
func TestBodyProgressFindsTheConnection(t *testing.T) {
	var seen io.ReadCloser
	h := BodyProgress(time.Minute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Body
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	request := func() *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader("body"))
		return r
	}

	dw := &deadlineWriter{}
	r := request()
	h.ServeHTTP(wrapped{wrapped{dw}}, r)
	if _, ok := seen.(*progressBody); !ok || len(dw.set) < 2 || dw.set[0].IsZero() || !dw.set[len(dw.set)-1].IsZero() {
		t.Errorf("through two wrappers: body %T, deadlines %v; want a progressBody, a deadline set, then lifted", seen, dw.set)
	}

	r = request()
	body := r.Body
	h.ServeHTTP(wrapped{nil}, r)
	if seen != body {
		t.Errorf("a writer without deadlines: the handler read a %T, want the request's own body", seen)
	}
}
