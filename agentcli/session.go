package agentcli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// subscriptionID is the operation ID of the forwardRequests subscription.
const subscriptionID = "forward-requests"

// describeID is the operation ID of the endpointQuery sent on connect.
const describeID = "describe-endpoint"

// session is one WebSocket connection to the relay.
type session struct {
	a    *agent
	conn *websocket.Conn

	writeMu sync.Mutex // gorilla allows one writer at a time

	opsMu  sync.Mutex
	ops    map[string]chan error // completeForward operation ID → its result
	nextOp int
}

// serve runs one connection until it drops or ctx ends. acked reports
// whether the server accepted the connection_init.
func (a *agent) serve(ctx context.Context) (acked bool, err error) {
	dialer := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: a.readTimeout,
		Subprotocols:     []string{subprotocol},
		TLSClientConfig:  a.cfg.tls,
	}
	conn, resp, err := dialer.DialContext(ctx, a.cfg.wsURL, nil)
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return false, &RefusedError{reason: fmt.Sprintf("%s (check --token)", resp.Status)}
		}
		if resp != nil {
			// Say what answered instead of only "bad handshake": a 503 here
			// usually means --server names a host that is not the relay's
			// bare domain.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return false, fmt.Errorf("connect to %s: %w: server answered %s %q", a.cfg.wsURL, err, resp.Status, strings.TrimSpace(string(body)))
		}
		if hint := tlsHint(err); hint != "" {
			return false, fmt.Errorf("connect to %s: %w (%s)", a.cfg.wsURL, err, hint)
		}
		return false, fmt.Errorf("connect to %s: %w", a.cfg.wsURL, err)
	}
	if conn.Subprotocol() != subprotocol {
		conn.Close()
		return false, fmt.Errorf("connect to %s: server does not speak %s", a.cfg.wsURL, subprotocol)
	}
	s := &session{a: a, conn: conn, ops: map[string]chan error{}}

	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // in-flight forwards are cut short with the session
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-sctx.Done()
		if ctx.Err() != nil {
			s.writeClose(websocket.CloseNormalClosure, "agent stopped")
		}
		conn.Close() // unblocks the reader
	}()

	if err := s.handshake(); err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) && ce.Code == websocket.CloseNormalClosure && ctx.Err() == nil {
			// Servers that reject connection_init (gqlgen's InitFunc)
			// close normally before the ack.
			return false, &RefusedError{reason: fmt.Sprintf("connection closed before connection_ack (%d %s); check --token", ce.Code, ce.Text)}
		}
		return false, s.readErr(ctx, err)
	}
	// The Endpoint is asked for before anything is announced: a bad token
	// or an unknown Endpoint is a refusal, not a connection.
	ep, err := s.describe()
	if err != nil {
		return false, s.readErr(ctx, err)
	}
	a.stderr.printf("connected to %s, forwarding to http://%s\n", a.cfg.wsURL, a.cfg.target)
	s.described(ep)
	if err := s.subscribe(subscriptionID, forwardRequestsQuery, map[string]any{"e": a.cfg.endpoint}); err != nil {
		return true, s.readErr(ctx, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.pingLoop(sctx)
	}()
	return true, s.readErr(ctx, s.readLoop(sctx, &wg))
}

// handshake sends connection_init with the token and the local target
// (which the relay records with the agent's connection) and waits for the
// ack.
func (s *session) handshake() error {
	payload, err := json.Marshal(map[string]string{"Authorization": "Bearer " + s.a.cfg.token, "agentTarget": s.a.cfg.target})
	if err != nil {
		return err
	}
	if err := s.write(wsMessage{Type: msgConnectionInit, Payload: payload}); err != nil {
		return err
	}
	for {
		m, err := s.read()
		if err != nil {
			return err
		}
		switch m.Type {
		case msgConnectionAck:
			return nil
		case msgPing:
			if err := s.write(wsMessage{Type: msgPong}); err != nil {
				return err
			}
		case msgPong:
		default:
			return fmt.Errorf("unexpected %q before connection_ack", m.Type)
		}
	}
}

// describe runs endpointQuery and waits for its answer. Its complete
// message comes later and is ignored by the read loop.
func (s *session) describe() (endpointInfo, error) {
	if err := s.subscribe(describeID, endpointQuery, map[string]any{"e": s.a.cfg.endpoint}); err != nil {
		return endpointInfo{}, err
	}
	for {
		m, err := s.read()
		if err != nil {
			return endpointInfo{}, err
		}
		switch {
		case m.Type == msgPing:
			if err := s.write(wsMessage{Type: msgPong}); err != nil {
				return endpointInfo{}, err
			}
			continue
		case m.ID != describeID:
			continue
		case m.Type == msgError:
			var errs []gqlError
			if err := json.Unmarshal(m.Payload, &errs); err != nil {
				return endpointInfo{}, fmt.Errorf("endpoint query: %s", m.Payload)
			}
			return endpointInfo{}, gqlErrorsErr(errs, s.a.cfg.endpoint)
		case m.Type != msgNext || m.next == nil:
			return endpointInfo{}, fmt.Errorf("endpoint query: unexpected %q", m.Type)
		case len(m.next.Errors) > 0:
			return endpointInfo{}, gqlErrorsErr(m.next.Errors, s.a.cfg.endpoint)
		case m.next.Data.Endpoint == nil:
			// Another account's Endpoint reads as null, like an unknown id.
			return endpointInfo{}, gqlErrorsErr([]gqlError{notFound}, s.a.cfg.endpoint)
		}
		return *m.next.Data.Endpoint, nil
	}
}

var notFound = func() gqlError {
	var e gqlError
	e.Message = "not found"
	e.Extensions.Code = "NOT_FOUND"
	return e
}()

// readLoop dispatches server messages until the connection fails.
func (s *session) readLoop(ctx context.Context, wg *sync.WaitGroup) error {
	for {
		m, err := s.read()
		if err != nil {
			return err
		}
		switch m.Type {
		case msgPing:
			if err := s.write(wsMessage{Type: msgPong}); err != nil {
				return err
			}
		case msgPong, msgConnectionAck:
			// Any message already moved the read deadline.
		case msgNext, msgError, msgComplete:
			switch m.ID {
			case subscriptionID:
			default:
				s.finishOp(m)
				continue
			}
			fr, err := s.subscriptionItem(m)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.handle(ctx, fr)
			}()
		default:
			return fmt.Errorf("unexpected message %q", m.Type)
		}
	}
}

// subscriptionItem reads a forward request from a message of the
// subscription; the subscription's end or error ends the session.
func (s *session) subscriptionItem(m wsMessage) (forwardRequest, error) {
	switch m.Type {
	case msgComplete:
		return forwardRequest{}, errors.New("server ended the forwardRequests subscription")
	case msgError:
		var errs []gqlError
		if err := json.Unmarshal(m.Payload, &errs); err != nil {
			return forwardRequest{}, fmt.Errorf("subscription error: %s", m.Payload)
		}
		return forwardRequest{}, gqlErrorsErr(errs, s.a.cfg.endpoint)
	}
	if m.next == nil {
		return forwardRequest{}, fmt.Errorf("decode forward request: %s", m.Payload)
	}
	if len(m.next.Errors) > 0 {
		return forwardRequest{}, gqlErrorsErr(m.next.Errors, s.a.cfg.endpoint)
	}
	if m.next.Data.ForwardRequests == nil {
		return forwardRequest{}, errors.New("decode forward request: next message without forwardRequests")
	}
	return *m.next.Data.ForwardRequests, nil
}

// handle forwards one request to the local target and reports the answer.
func (s *session) handle(ctx context.Context, fr forwardRequest) {
	var res localResult
	req, err := fr.local()
	if err != nil {
		res = localResult{Status: 502, Err: err, Failure: "the agent could not read the request"}
	} else {
		res = s.a.fwd.forward(ctx, req)
	}
	if res.Err != nil {
		s.a.stdout.printf("%s %s → %d %v\n", fr.Method, fr.Path, res.Status, res.Err)
	} else {
		s.a.stdout.printf("%s %s → %d (%d ms)\n", fr.Method, fr.Path, res.Status, res.Duration.Milliseconds())
	}
	if err := s.complete(ctx, fr.AttemptID, res); err != nil && ctx.Err() == nil {
		s.a.stderr.printf("%s %s: %v\n", fr.Method, fr.Path, err)
	}
}

// complete sends completeForward over the socket and waits for its result.
func (s *session) complete(ctx context.Context, attemptID string, res localResult) error {
	in := completeInput{
		AttemptID:  attemptID,
		Headers:    toWireHeaders(res.Headers),
		BodyBase64: base64.StdEncoding.EncodeToString(res.Body),
		DurationMs: res.Duration.Milliseconds(),
	}
	if res.Err != nil {
		in.Error = res.Err.Error()
		in.Failure = res.Failure
		if res.Status == http.StatusGatewayTimeout {
			in.Status = &res.Status // the target was too slow, not unreachable
		}
	} else {
		in.Status = &res.Status
	}

	s.opsMu.Lock()
	s.nextOp++
	id := "complete-" + strconv.Itoa(s.nextOp)
	done := make(chan error, 1)
	s.ops[id] = done
	s.opsMu.Unlock()
	defer func() {
		s.opsMu.Lock()
		delete(s.ops, id)
		s.opsMu.Unlock()
	}()

	if err := s.subscribe(id, completeForwardMutation, map[string]any{"input": in}); err != nil {
		return err
	}
	t := time.NewTimer(s.a.readTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("no answer to completeForward within %s", s.a.readTimeout)
	}
}

// finishOp hands the result of a completeForward to its waiter.
func (s *session) finishOp(m wsMessage) {
	s.opsMu.Lock()
	done, ok := s.ops[m.ID]
	delete(s.ops, m.ID)
	s.opsMu.Unlock()
	if !ok {
		return // its complete after the next, or an operation given up on
	}
	var err error
	switch m.Type {
	case msgComplete:
		err = errors.New("completeForward ended without a result")
	case msgError:
		var errs []gqlError
		if json.Unmarshal(m.Payload, &errs) != nil {
			err = fmt.Errorf("completeForward: %s", m.Payload)
		} else {
			err = completeErr(errs)
		}
	case msgNext:
		if m.next == nil {
			err = fmt.Errorf("completeForward: %s", m.Payload)
		} else if len(m.next.Errors) > 0 {
			err = completeErr(m.next.Errors)
		}
	}
	done <- err
}

// described prints the Endpoint's public URL, as the first thing a user
// needs to hand to a webhook sender; warns when the Endpoint is in LOG
// mode, where the relay answers deliveries itself and nothing reaches the
// agent; and warns when other agents already serve the Endpoint, since the
// relay then hands each delivery to one of them in turn.
func (s *session) described(ep endpointInfo) {
	s.a.stderr.printf("public URL %s → http://%s\n", ep.URL, s.a.cfg.target)
	if ep.Mode != "PROXY" {
		s.a.stderr.printf("endpoint %s is in %s mode: its deliveries are recorded and answered by the relay, not forwarded; set its mode to PROXY to forward them\n", s.a.cfg.endpoint, ep.Mode)
	}
	if ep.AgentCount > 0 {
		s.a.stderr.printf("warning: %d other agent connection(s) already serve endpoint %s; the relay hands each delivery to one of the connected agents in turn, so this agent gets only some of them (stop the other agent unless that is intended; right after a reconnect the count may include this agent's previous connection)\n", ep.AgentCount, s.a.cfg.endpoint)
	}
}

// pingLoop pings the server; the read deadline catches missing answers.
func (s *session) pingLoop(ctx context.Context) {
	t := time.NewTicker(s.a.pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.write(wsMessage{Type: msgPing}); err != nil {
				s.conn.Close() // the reader reports the failure
				return
			}
		}
	}
}

// subscribe sends a subscribe message. Its payload is encoded with the
// frame in one pass: a completeForward carries the whole response body,
// which a pre-encoded json.RawMessage would have scanned and copied again.
func (s *session) subscribe(id, query string, vars map[string]any) error {
	return s.writeFrame(msgSubscribe, subscribeFrame{ID: id, Type: msgSubscribe, Payload: gqlRequest{Query: query, Variables: vars}})
}

// subscribeFrame is a subscribe message with its payload typed.
type subscribeFrame struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Payload gqlRequest `json:"payload"`
}

func (s *session) write(m wsMessage) error { return s.writeFrame(m.Type, m) }

func (s *session) writeFrame(typ string, frame any) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.conn.SetWriteDeadline(time.Now().Add(s.a.writeTimeout))
	if err := s.conn.WriteJSON(frame); err != nil {
		return fmt.Errorf("write %s: %w", typ, err)
	}
	return nil
}

func (s *session) writeClose(code int, text string) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

// read returns the next message; silence past readTimeout is an error.
func (s *session) read() (wsMessage, error) {
	s.conn.SetReadDeadline(time.Now().Add(s.a.readTimeout))
	var m wsMessage
	_, data, err := s.conn.ReadMessage()
	if err != nil {
		return m, err
	}
	var f nextFrame
	if json.Unmarshal(data, &f) == nil && f.Type == msgNext {
		return wsMessage{ID: f.ID, Type: f.Type, next: &f.Payload}, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decode message: %w", err)
	}
	return m, nil
}

// readErr explains why a session ended: refusal close codes become a
// refusedError, a read timeout says the server went silent.
func (s *session) readErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case closeUnauthorized, closeForbidden:
			return &RefusedError{reason: fmt.Sprintf("%d %s (check --token and --endpoint)", ce.Code, ce.Text)}
		}
		return fmt.Errorf("server closed the connection (%d %s)", ce.Code, ce.Text)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no message from server within %s", s.a.readTimeout)
	}
	return err
}
