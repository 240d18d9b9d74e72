package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"
)

// A frame is an 8-byte request number followed by fields, each a uvarint
// length and its bytes: method, target, headers, body to the agent; status
// and body back.

func appendField(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func readField(b []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, errors.New("malformed frame")
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// tunnel holds the one agent connection and the requests waiting for it.
type tunnel struct {
	connected chan struct{}
	conn      *websocket.Conn
	writeMu   sync.Mutex
	next      atomic.Uint64
	mu        sync.Mutex
	waiting   map[uint64]chan []byte
	// oneRecord: the request is recorded with its answer, once the answer
	// is in (as the relay records a receipt whose answer came within its
	// hold), instead of twice.
	oneRecord bool
	stages    stages
}

func newTunnel() *tunnel {
	return &tunnel{connected: make(chan struct{}), waiting: map[uint64]chan []byte{}}
}

func (t *tunnel) accept(c echo.Context) error {
	conn, err := (&websocket.Upgrader{}).Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the upgrader has answered
	}
	select {
	case <-t.connected:
		return conn.Close() // one agent only
	default:
	}
	t.conn = conn
	close(t.connected)
	for {
		_, frame, err := conn.ReadMessage()
		if err != nil || len(frame) < 8 {
			return nil
		}
		id := binary.BigEndian.Uint64(frame)
		t.mu.Lock()
		ch := t.waiting[id]
		delete(t.waiting, id)
		t.mu.Unlock()
		if ch != nil {
			ch <- frame[8:]
		}
	}
}

// proxy records the request, forwards it while that record is being made
// durable (as the relay does), records the answer, and passes it back once
// both records are durable.
func (t *tunnel) proxy(c echo.Context, lg *eventLog) error {
	ctx := c.Request().Context()
	select {
	case <-t.connected:
	case <-ctx.Done():
		return ctx.Err()
	}
	req, err := capture(c)
	if err != nil {
		return err
	}
	var received <-chan error
	if !t.oneRecord {
		received = lg.append(req)
	}

	id := t.next.Add(1)
	frame := binary.BigEndian.AppendUint64(make([]byte, 0, 64+len(req.headers)+len(req.body)), id)
	for _, f := range [][]byte{[]byte(req.method), []byte(req.target), req.headers, req.body} {
		frame = appendField(frame, f)
	}
	answer := make(chan []byte, 1)
	t.mu.Lock()
	t.waiting[id] = answer
	t.mu.Unlock()
	sent := time.Now()
	t.writeMu.Lock()
	err = t.conn.WriteMessage(websocket.BinaryMessage, frame)
	t.writeMu.Unlock()
	if err != nil {
		return err
	}
	var reply []byte
	select {
	case reply = <-answer:
	case <-ctx.Done():
		return ctx.Err()
	}
	if len(reply) < 2 {
		return errors.New("malformed answer")
	}
	answered := time.Now()
	status, body := int(binary.BigEndian.Uint16(reply)), reply[2:]
	if t.oneRecord {
		req.status, req.answer = status, body
		if err := <-lg.append(req); err != nil {
			return err
		}
	} else {
		responded := lg.append(&record{kind: "responded", address: req.address, target: req.target, body: body})
		if err := errors.Join(<-received, <-responded); err != nil {
			return err
		}
	}
	t.stages.add(answered.Sub(sent), time.Since(answered))
	return c.Blob(status, "application/json", body)
}

// runAgent dials a proxy-mode floorserver and calls the local handler for
// each frame, concurrently, answering on the same connection.
func runAgent(ctx context.Context, relay, target string) error {
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+relay+"/agent", nil)
	if err != nil {
		return fmt.Errorf("dial %s: %w", relay, err)
	}
	go func() {
		<-ctx.Done()
		_ = conn.Close()
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var writeMu sync.Mutex
	for {
		_, frame, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read frame: %w", err)
		}
		go func() {
			out, err := call(ctx, client, target, frame)
			if err != nil {
				out = binary.BigEndian.AppendUint16(append([]byte(nil), frame[:8]...), http.StatusBadGateway)
			}
			writeMu.Lock()
			defer writeMu.Unlock()
			_ = conn.WriteMessage(websocket.BinaryMessage, out)
		}()
	}
}

// call makes the request a frame describes and returns the answer frame.
func call(ctx context.Context, client *http.Client, target string, frame []byte) ([]byte, error) {
	if len(frame) < 8 {
		return nil, errors.New("malformed frame")
	}
	var fields [4][]byte
	rest := frame[8:]
	for i := range fields {
		var err error
		if fields[i], rest, err = readField(rest); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, string(fields[0]), "http://"+target+string(fields[1]), bytes.NewReader(fields[3]))
	if err != nil {
		return nil, err
	}
	for line := range bytes.SplitSeq(fields[2], []byte("\n")) {
		if name, value, ok := bytes.Cut(line, []byte(": ")); ok {
			req.Header.Add(string(name), string(value))
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint16(append(make([]byte, 0, 10+len(body)), frame[:8]...), uint16(resp.StatusCode))
	return append(out, body...), nil
}
