package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// RawRequest is a request written to the wire exactly as given: the request
// target is not normalized in any way.
type RawRequest struct {
	Method  string
	Target  string // raw request target, e.g. "//a//b" or "/a%2Fb?x=1&x=2"
	Host    string
	Headers [][2]string // in order; repeats allowed
	Body    []byte
}

// Response is a fully read answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// SendRaw writes req to the relay over a fresh TCP connection and reads the answer.
func (r *Relay) SendRaw(t testing.TB, req RawRequest) Response {
	t.Helper()
	resp, err := r.TrySendRaw(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.Target, err)
	}
	return resp
}

// TrySendRaw is SendRaw returning the error (for load loops that expect some).
func (r *Relay) TrySendRaw(req RawRequest) (Response, error) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 10*time.Second)
	if err != nil {
		return Response{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.Target, req.Host)
	for _, h := range req.Headers {
		fmt.Fprintf(&b, "%s: %s\r\n", h[0], h[1])
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n", len(req.Body))
	b.Write(req.Body)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return Response{}, err
	}
	hr, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: req.Method})
	if err != nil {
		return Response{}, err
	}
	defer hr.Body.Close()
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: hr.StatusCode, Header: hr.Header, Body: body}, nil
}
