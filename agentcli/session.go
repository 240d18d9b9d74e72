package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/cork"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/workers"
)

// Operation IDs: the i-th Endpoint's forwardRequests subscription and
// the endpointQuery sent for it on connect.
func subscriptionID(i int) string { return "forward-" + strconv.Itoa(i) }
func describeID(i int) string     { return "describe-" + strconv.Itoa(i) }

// session is one WebSocket connection to the relay.
type session struct {
	a      *agent
	conn   *websocket.Conn
	served map[string]*served // subscription ID → the Endpoint it serves

	writeMu sync.Mutex // gorilla allows one writer at a time

	// Complete frames waiting for the socket (sendComplete), owned by the
	// queue until written, and the socket below conn, corked while a
	// batch of them is written.
	cork    *cork.Conn
	queueMu sync.Mutex
	queue   []*[]byte
	spare   []*[]byte // an emptied batch's array, for the queue to reuse
	leading bool      // a worker is about to write the queue
	sendErr error     // the first failed write; the socket is then closing

	// binary: the relay agreed on agentwire's subprotocol, so forwards
	// arrive and answers leave as binary frames (see internal/agentwire).
	binary bool
	// receipts: the relay agreed on a subprotocol whose answers carry
	// fidelity receipts (agentwire.CarriesReceipts), so it records them.
	// On an older subprotocol or plain GraphQL the agent sends none, which
	// an older relay would refuse.
	receipts bool
	// unacked: binary, on a subprotocol whose relay answers a Complete
	// frame only to refuse it (agentwire.Acknowledges is false). A worker
	// then waits for no Done frame; a refusal comes after it has moved on,
	// and sent remembers what it refuses (see refused). Otherwise each
	// worker waits for the Done frame of its own Complete.
	unacked bool
	sent    sentAnswers

	opsMu  sync.Mutex
	ops    map[string]chan error // completeForward operation ID → its result
	dones  map[string]chan error // attempt ID → the relay's Done of its Complete frame
	nextOp int

	roleMu   sync.Mutex
	roles    map[int]bool // Endpoint index → whether this agent is its primary, as last reported
	attached map[int]bool // Endpoint indexes the relay lists this agent as a listener of

	announce  func() // tells the Observer the agent is connected, once
	announced sync.Once
	connected atomic.Bool // announce has run: forwards skip servedBy

	// workers run the forwards, each on a goroutine kept from an earlier
	// forward when one is idle: its stack is grown to the depth of a
	// forward (the local HTTP exchange under it) already.
	workers *workers.Pool[*worker]

	// rbuf is the buffer read reads messages into, reused by the next
	// read; only the reading goroutine touches it.
	rbuf []byte

	// refusals are the forwards the agent does not run, waiting for one
	// of at most maxRefusing workers (refusing counts them) to report
	// them (refuse); made by the reading goroutine with the first.
	refusals chan refusal
	refusing atomic.Int32
}

// workerIdle is how long a worker goroutine waits for another forward
// before it ends.
const workerIdle = 5 * time.Second

// worker is what a worker goroutine keeps from one forward to the next,
// so that a forward does not allocate it again.
type worker struct {
	// wait bounds complete's wait for the relay's answer; nil until the
	// first, stopped between forwards.
	wait *time.Timer
	// done receives the relay's answer to complete (see finishIn).
	done chan error
}

// served is an Endpoint of the session with its resolved target.
type served struct {
	index  int // among the agent's routes
	info   EndpointInfo
	target Target
	fwd    *forwarder
}

// MaxRelayMessage bounds a message the agent reads from the relay: the
// largest the relay sends is a forward of a body of at most 16 MiB (its
// --max-body bound) with the request's headers, as binary or, on plain
// GraphQL, with the body in base64 (about 21.4 MiB) and the headers
// escaped in JSON. Past it the socket closes (1009) and the agent dials
// again, instead of holding whatever a relay, or whoever answers at its
// address, sends.
const MaxRelayMessage = 32 << 20

// serve runs one connection until it drops or ctx ends. acked reports
// whether the server accepted the connection_init.
func (a *agent) serve(ctx context.Context) (acked bool, err error) {
	protocols := append(slices.Clone(agentwire.Subprotocols), gqlws.Subprotocol)
	if a.opts.PlainGraphQL {
		protocols = []string{gqlws.Subprotocol}
	}
	var corked *cork.Conn
	var hs *apiclient.HandshakeConn
	dialer := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: a.readTimeout,
		Subprotocols:     protocols,
		TLSClientConfig:  a.tls,
		// The socket to the relay (or its proxy), below any TLS.
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := newDialer().DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			hs = apiclient.LimitHandshake(c)
			corked = cork.New(hs)
			return corked, nil
		},
	}
	conn, resp, err := dialer.DialContext(ctx, a.wsURL, nil)
	if hs != nil {
		hs.Upgraded()
	}
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
			return false, fmt.Errorf("connect to %s: %w: server answered %s %q", a.wsURL, err, resp.Status, strings.TrimSpace(string(body)))
		}
		if hint := tlsHint(err); hint != "" {
			return false, fmt.Errorf("connect to %s: %w (%s)", a.wsURL, err, hint)
		}
		return false, fmt.Errorf("connect to %s: %w", a.wsURL, err)
	}
	conn.SetReadLimit(MaxRelayMessage)
	proto := conn.Subprotocol()
	binary := slices.Contains(agentwire.Subprotocols, proto) && !a.opts.PlainGraphQL
	if conn.Subprotocol() != gqlws.Subprotocol && !binary {
		conn.Close()
		return false, fmt.Errorf("connect to %s: server does not speak %s", a.wsURL, gqlws.Subprotocol)
	}
	s := &session{a: a, conn: conn, cork: corked, ops: map[string]chan error{}, dones: map[string]chan error{}, served: map[string]*served{}, binary: binary,
		receipts: binary && agentwire.CarriesReceipts(proto), unacked: binary && !agentwire.Acknowledges(proto)}

	sctx, cancel := context.WithCancel(ctx)
	s.workers = workers.New(workerIdle, sctx.Done(), func() *worker { return &worker{done: make(chan error, 1)} })
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		s.workers.Wait() // in-flight forwards are cut short with the session
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
	// The Endpoints are asked for before anything is announced: a bad
	// token or an unknown Endpoint is a refusal, not a connection.
	infos := make([]EndpointInfo, 0, len(a.routes))
	for i, r := range a.routes {
		sv, err := s.describe(i, r)
		if err != nil {
			return false, s.readErr(ctx, err)
		}
		sv.index = i
		s.served[subscriptionID(i)] = sv
		infos = append(infos, sv.info)
	}
	for i := range a.routes {
		sv := s.served[subscriptionID(i)]
		vars := map[string]any{"e": sv.info.ID, "t": sv.target.Host}
		if s.a.opts.Primary {
			vars["p"] = true
		}
		if len(s.a.opts.Filters) > 0 {
			vars["f"] = FilterInputs(s.a.opts.Filters)
		}
		if err := s.subscribe(subscriptionID(i), forwardRequestsQuery, vars); err != nil {
			return true, s.readErr(ctx, err)
		}
	}
	// Announced once the relay has attached every session (roleLoop asks
	// it): the public URL it prints is then served, not refused 503 by a
	// relay still recording the session's start, and a session the relay
	// refuses (TOO_MANY_SESSIONS, RATE_LIMITED) is never said to be
	// connected.
	s.announce = func() {
		s.announced.Do(func() {
			if sctx.Err() == nil {
				a.obs.State(StateEvent{State: Connected, Server: a.wsURL, Endpoints: infos})
			}
			s.connected.Store(true)
		})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.pingLoop(sctx)
	}()
	// A relay that never says (an older one) still gets the agent
	// announced, later.
	late := time.AfterFunc(attachWait, s.announce)
	defer late.Stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.roleLoop(sctx)
	}()
	return true, s.readErr(ctx, s.readLoop(sctx))
}

// handshake sends connection_init with the token and the local target
// (which the relay records with the agent's connection) and waits for the
// ack.
func (s *session) handshake() error {
	init := map[string]string{"Authorization": "Bearer " + s.a.opts.Token}
	if t := s.a.routes[0].target; t != nil {
		// Relays without forwardRequests' target argument record this one.
		init["agentTarget"] = t.Host
	}
	payload, err := json.Marshal(init)
	if err != nil {
		return err
	}
	if err := s.write(wsMessage{Type: gqlws.ConnectionInit, Payload: payload}); err != nil {
		return err
	}
	for {
		m, err := s.read()
		if err != nil {
			return err
		}
		switch m.Type {
		case gqlws.ConnectionAck:
			return nil
		case gqlws.Ping:
			if err := s.write(wsMessage{Type: gqlws.Pong}); err != nil {
				return err
			}
		case gqlws.Pong:
		default:
			return fmt.Errorf("unexpected %q before connection_ack", m.Type)
		}
	}
}

// describe runs endpointQuery for the i-th route and waits for its
// answer. Its complete message comes later and is ignored by the read loop.
func (s *session) describe(i int, r route) (*served, error) {
	id := describeID(i)
	if err := s.subscribe(id, endpointQuery, map[string]any{"e": r.id}); err != nil {
		return nil, err
	}
	for {
		m, err := s.read()
		if err != nil {
			return nil, err
		}
		switch {
		case m.Type == gqlws.Ping:
			if err := s.write(wsMessage{Type: gqlws.Pong}); err != nil {
				return nil, err
			}
			continue
		case m.ID != id:
			continue
		case m.Type == gqlws.Error:
			errs, err := payloadErrors(m.Payload)
			if err != nil {
				return nil, fmt.Errorf("endpoint query: %w: %.200s", err, m.Payload)
			}
			return nil, gqlErrorsErr(errs, r.id)
		case m.Type != gqlws.Next || m.next == nil:
			return nil, fmt.Errorf("endpoint query: unexpected %q", m.Type)
		case len(m.next.Errors) > 0:
			return nil, gqlErrorsErr(m.next.Errors, r.id)
		case m.next.Data.Endpoint == nil:
			// Another account's Endpoint reads as null, like an unknown id.
			return nil, gqlErrorsErr([]gqlError{notFound}, r.id)
		}
		ep := *m.next.Data.Endpoint
		var target Target
		switch {
		case r.target != nil:
			target = *r.target
		case ep.Target != nil && *ep.Target != "":
			t, err := ParseTarget(*ep.Target)
			if err != nil {
				return nil, &RefusedError{reason: fmt.Sprintf("endpoint %s: stored target: %v", r.id, err)}
			}
			target = t
		default:
			return nil, &RefusedError{reason: fmt.Sprintf("endpoint %s has no target: give one (--endpoint %s=PORT)", r.id, r.id)}
		}
		info := EndpointInfo{ID: r.id, Name: ep.Name, URL: ep.URL, Mode: ep.Mode, Target: target.String(), OtherAgents: ep.AgentCount}
		return &served{info: info, target: target, fwd: s.a.forwarder(target)}, nil
	}
}

var notFound = func() gqlError {
	var e gqlError
	e.Message = "not found"
	e.Extensions.Code = "NOT_FOUND"
	return e
}()

// readLoop dispatches server messages until the connection fails.
func (s *session) readLoop(ctx context.Context) error {
	for {
		m, err := s.read()
		if err != nil {
			return err
		}
		switch m.Type {
		case gqlws.Ping:
			if err := s.write(wsMessage{Type: gqlws.Pong}); err != nil {
				return err
			}
		case gqlws.Pong, gqlws.ConnectionAck:
			// Any message already moved the read deadline.
		case binaryFrame:
			if err := s.binaryFrame(ctx, m); err != nil {
				return err
			}
		case gqlws.Next, gqlws.Error, gqlws.Complete:
			if strings.HasPrefix(m.ID, roleOpPrefix) {
				s.roleAnswer(m)
				continue
			}
			sv, ok := s.served[m.ID]
			if !ok {
				s.finishOp(m)
				continue
			}
			fr, err := s.subscriptionItem(m, sv.info.ID)
			if err != nil {
				return err
			}
			req, reqErr := fr.local()
			s.dispatch(ctx, sv, work{attemptID: fr.AttemptID, deliveryID: fr.DeliveryID, method: fr.Method, path: fr.Path, req: req, err: reqErr})
		default:
			return fmt.Errorf("unexpected message %q", m.Type)
		}
	}
}

// subscriptionItem reads a forward request from a message of the
// subscription; the subscription's end or error ends the session.
func (s *session) subscriptionItem(m wsMessage, endpoint string) (forwardRequest, error) {
	switch m.Type {
	case gqlws.Complete:
		return forwardRequest{}, errors.New("server ended the forwardRequests subscription")
	case gqlws.Error:
		errs, err := payloadErrors(m.Payload)
		if err != nil {
			return forwardRequest{}, fmt.Errorf("subscription error: %w: %.200s", err, m.Payload)
		}
		return forwardRequest{}, gqlErrorsErr(errs, endpoint)
	}
	if m.next == nil {
		return forwardRequest{}, fmt.Errorf("decode forward request: %s", m.Payload)
	}
	if len(m.next.Errors) > 0 {
		return forwardRequest{}, gqlErrorsErr(m.next.Errors, endpoint)
	}
	if m.next.Data.ForwardRequests == nil {
		return forwardRequest{}, errors.New("decode forward request: next message without forwardRequests")
	}
	return *m.next.Data.ForwardRequests, nil
}

// MaxBytesInFlight bounds the bytes of the requests the agent holds while
// their forwards run, bodies and headers: a relay sends forwards without
// waiting for answers, each up to MaxRelayMessage, and a slow local target
// kept every one of them. A forward past it is not run: the agent reports
// it failed (ErrTooMuchInFlight) and holds none of it.
const MaxBytesInFlight = 256 << 20

// inFlightBytes is MaxBytesInFlight; tests lower it.
var inFlightBytes int64 = MaxBytesInFlight

// ErrTooMuchInFlight is the failure of a forward that would have taken the
// requests in flight past MaxBytesInFlight.
var ErrTooMuchInFlight = fmt.Errorf("the agent holds %d MiB of requests in flight already, its bound", MaxBytesInFlight>>20)

// weight is what the agent holds of r while it runs.
func (r localRequest) weight() int64 {
	n := int64(len(r.Method) + len(r.Path) + len(r.Body) + 64)
	for _, h := range r.Headers {
		n += int64(len(h.Name) + len(h.Value) + 32)
	}
	return n
}

// dispatch runs w on a worker when its request fits what the agent holds
// in flight; else it reports it failed without running it (refuse).
func (s *session) dispatch(ctx context.Context, sv *served, w work) {
	s.servedBy(sv)
	weight := w.req.weight()
	if w.err != nil || !s.a.inFlight.TryAcquire(weight) {
		if w.err == nil {
			w.err = ErrTooMuchInFlight
		}
		s.refuse(ctx, sv, w)
		return
	}
	s.workers.Go(func(wk *worker) {
		s.handle(ctx, wk, sv, w)
		s.a.inFlight.Release(weight)
	})
}

// work is one forward request as the agent runs it, from either path.
type work struct {
	attemptID, deliveryID string
	method, path          string // as the relay sent them, for the observer
	req                   localRequest
	err                   error // the request could not be read
}

// binaryFrame acts on a binary frame: a forward request to run, or the
// relay's Done for a Complete.
func (s *session) binaryFrame(ctx context.Context, m wsMessage) error {
	frame := m.frame
	switch agentwire.Kind(frame) {
	case agentwire.KindForward:
		f, err := decodeForward(frame)
		if err != nil {
			return err
		}
		if m.reused {
			// The next message overwrites the frame; the strings are
			// copies already.
			f.Body = bytes.Clone(f.Body)
		}
		sv, ok := s.served[f.Operation]
		if !ok {
			return fmt.Errorf("forward request for unknown subscription %q", f.Operation)
		}
		w := work{attemptID: f.AttemptID, deliveryID: f.DeliveryID, method: f.Method, path: f.Target,
			req: localRequest{Method: f.Method, Path: f.Target, Headers: f.Headers, Body: f.Body,
				Origin: origin{Host: f.Host, Scheme: f.Scheme, Sender: f.RemoteAddr}}}
		s.dispatch(ctx, sv, w)
	case agentwire.KindDone:
		d, err := agentwire.DecodeDone(frame)
		if err != nil {
			return err
		}
		var result error
		switch d.Code {
		case "":
		case "NOT_FOUND":
			result = errAttemptGone
		default:
			result = fmt.Errorf("relay refused the answer: %s (%s)", d.Message, d.Code)
		}
		if !s.unacked {
			s.finishIn(s.dones, d.AttemptID, result)
		} else if result != nil {
			s.refused(d.AttemptID, result)
		}
	default:
		return fmt.Errorf("unexpected binary frame of kind %q", agentwire.Kind(frame))
	}
	return nil
}

// handle forwards one request to the local target, reports the answer
// and tells the observer.
func (s *session) handle(ctx context.Context, wk *worker, sv *served, w work) {
	ev := ForwardEvent{Time: time.Now(), EndpointID: sv.info.ID, DeliveryID: w.deliveryID, AttemptID: w.attemptID, Method: w.method, Path: w.path,
		Copy: s.receivesCopies(sv)}
	var res localResult
	if w.err != nil {
		failure := "the agent could not read the request"
		if errors.Is(w.err, ErrTooMuchInFlight) {
			failure = "the agent holds as many requests as it takes already"
		}
		res = localResult{Status: 502, Err: w.err, Failure: failure}
	} else {
		ev.Path, ev.RequestHeaders, ev.RequestBody = w.req.Path, w.req.Headers, w.req.Body
		res = sv.fwd.forward(ctx, w.req)
		if s.a.opts.Verify != nil {
			// Checked here, so the verdict goes with the report; only the
			// verdict leaves this machine.
			res.Signature = s.a.opts.Verify(w.req.Headers, w.req.Body, ev.Time)
			ev.Signature = res.Signature
		}
	}
	ev.Status, ev.Duration = res.Status, res.Duration
	if res.Err != nil {
		ev.Error = res.Err.Error()
	}
	if s.unacked {
		s.sent.add(ev) // before the Complete goes: a refusal may come at once
	}
	if err := s.complete(ctx, wk, w.attemptID, res); err != nil && ctx.Err() == nil {
		ev.ReportError = err.Error()
	}
	s.a.obs.Forwarded(ev)
}

// complete sends completeForward over the socket and waits for its result,
// with wk's channel and timer; on a subprotocol that answers only refusals
// it returns once the Complete frame is written (refused reports those).
func (s *session) complete(ctx context.Context, wk *worker, attemptID string, res localResult) error {
	rep := report(attemptID, res)
	if !s.receipts {
		rep.Receipt = nil
	}
	if s.unacked {
		return s.sendCompleteOf(rep)
	}
	waits, id := s.ops, attemptID
	if s.binary {
		waits = s.dones
	}
	s.opsMu.Lock()
	if !s.binary {
		s.nextOp++
		id = "complete-" + strconv.Itoa(s.nextOp)
	}
	done := wk.done
	waits[id] = done
	s.opsMu.Unlock()
	defer s.forget(waits, id, done)

	if s.binary {
		if err := s.sendCompleteOf(rep); err != nil {
			return err
		}
	} else if err := s.subscribe(id, completeForwardMutation, map[string]any{"input": toCompleteInput(rep)}); err != nil {
		return err
	}
	if wk.wait == nil {
		wk.wait = time.NewTimer(s.a.readTimeout)
	} else {
		wk.wait.Reset(s.a.readTimeout)
	}
	defer wk.wait.Stop()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-wk.wait.C:
		return fmt.Errorf("no answer to completeForward within %s", s.a.readTimeout)
	}
}

// frameBuffers are buffers for complete frames, reused across forwards.
var frameBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledFrame bounds the frame buffers kept for reuse: a frame with a
// large body is built in a buffer of its own.
const maxPooledFrame = 64 << 10

// finishOp hands the result of a completeForward to its waiter.
func (s *session) finishOp(m wsMessage) {
	var err error
	switch m.Type {
	case gqlws.Complete:
		err = errors.New("completeForward ended without a result")
	case gqlws.Error:
		if errs, perr := payloadErrors(m.Payload); perr != nil {
			err = fmt.Errorf("completeForward: %w: %.200s", perr, m.Payload)
		} else {
			err = completeErr(errs)
		}
	case gqlws.Next:
		if m.next == nil {
			err = fmt.Errorf("completeForward: %s", m.Payload)
		} else if len(m.next.Errors) > 0 {
			err = completeErr(m.next.Errors)
		}
	}
	s.finish(m.ID, err)
}

// finish hands the result of the operation id to its waiter, if any: a
// completeForward's complete after its next, or a report given up on, has
// none.
func (s *session) finish(id string, result error) { s.finishIn(s.ops, id, result) }

// finishIn is finish for the waits of ops or dones. It sends under the
// lock, so that a waiter that gave up can drain its channel (a worker's,
// reused) knowing that no answer is still on its way; the channel has room
// for the one answer, and the entry is gone after it.
func (s *session) finishIn(waits map[string]chan error, id string, result error) {
	s.opsMu.Lock()
	defer s.opsMu.Unlock()
	if done, ok := waits[id]; ok {
		delete(waits, id)
		done <- result
	}
}

// forget ends the wait for id on done. An answer that came after the
// waiter gave up is dropped: done serves the worker's next forward, which
// must not read it.
func (s *session) forget(waits map[string]chan error, id string, done chan error) {
	s.opsMu.Lock()
	defer s.opsMu.Unlock()
	delete(waits, id)
	select {
	case <-done:
	default:
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
			if err := s.write(wsMessage{Type: gqlws.Ping}); err != nil {
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
	return s.writeFrame(gqlws.Subscribe, subscribeFrame{ID: id, Type: gqlws.Subscribe, Payload: gqlRequest{Query: query, Variables: vars}})
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

// sendCompleteOf encodes rep's Complete frame in a pooled buffer and
// sends it (sendComplete).
func (s *session) sendCompleteOf(rep agentwire.Complete) error {
	buf := frameBuffers.Get().(*[]byte)
	*buf = agentwire.AppendComplete((*buf)[:0], rep)
	return s.sendComplete(buf)
}

// sendComplete queues a Complete frame for the socket, which then owns
// buf. The worker that finds no other about to write becomes the one that
// does: it first lets the other workers whose answers are ready run, so
// that one write carries all their frames (under load, answers finish
// together). The others return at once; a failed write ends the session,
// and with it their wait for the relay's Done.
func (s *session) sendComplete(buf *[]byte) error {
	s.queueMu.Lock()
	if err := s.sendErr; err != nil {
		s.queueMu.Unlock()
		return err
	}
	s.queue = append(s.queue, buf)
	lead := !s.leading
	s.leading = true
	s.queueMu.Unlock()
	if !lead {
		return nil
	}
	runtime.Gosched()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.queueMu.Lock()
	batch := s.queue
	s.queue, s.spare = s.spare, nil // never the array batch is in
	s.leading = false
	s.queueMu.Unlock()

	err := s.writeBatch(batch)
	for i, b := range batch {
		if cap(*b) <= maxPooledFrame { // written: reusable
			frameBuffers.Put(b)
		}
		batch[i] = nil
	}
	s.queueMu.Lock()
	s.spare = batch[:0]
	if err != nil && s.sendErr == nil {
		s.sendErr = err
	}
	s.queueMu.Unlock()
	return err
}

// writeBatch writes frames, all but the last held by the cork so that the
// last write carries them all. Called with writeMu held.
func (s *session) writeBatch(frames []*[]byte) error {
	s.conn.SetWriteDeadline(time.Now().Add(s.a.writeTimeout))
	var err error
	for i, f := range frames {
		s.cork.Cork(i < len(frames)-1)
		if err = s.conn.WriteMessage(websocket.BinaryMessage, *f); err != nil {
			break
		}
	}
	// Uncorked whatever happened: a close frame may follow.
	if ferr := s.cork.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("write complete frame: %w", err)
	}
	return nil
}

func (s *session) writeClose(code int, text string) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
}

// read returns the next message; silence past readTimeout is an error.
// A binary frame may be in the session's read buffer (reused), which the
// next read overwrites: the caller then copies out what it keeps.
func (s *session) read() (wsMessage, error) {
	s.conn.SetReadDeadline(time.Now().Add(s.a.readTimeout))
	typ, data, err := s.readMessage()
	if err != nil {
		return wsMessage{}, err
	}
	if typ == websocket.BinaryMessage {
		if !s.binary {
			return wsMessage{}, errors.New("binary message on a graphql-transport-ws socket")
		}
		return wsMessage{Type: binaryFrame, frame: data, reused: s.rbuf != nil}, nil
	}
	return decodeText(data)
}

// decodeText decodes a text message of the relay, weighed first by what
// it decodes into (apiclient.CheckDecode): "{}" in a forward's list of
// headers is 3 bytes of text and a 40-byte wireHeader, so a message of
// MaxRelayMessage could have decoded into 440 MiB.
func decodeText(data []byte) (wsMessage, error) {
	var f nextFrame
	if err := apiclient.CheckDecode(data, &f); err != nil {
		return wsMessage{}, fmt.Errorf("decode message: %w", err)
	}
	if json.Unmarshal(data, &f) == nil && f.Type == gqlws.Next {
		return wsMessage{ID: f.ID, Type: f.Type, next: &f.Payload}, nil
	}
	// Declared here, not above: decoding into it puts it on the heap.
	var m wsMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("decode message: %w", err)
	}
	return m, nil
}

// payloadErrors decodes the payload of an error message, weighed first
// as decodeText weighs a message.
func payloadErrors(payload []byte) ([]gqlError, error) {
	var errs []gqlError
	if err := apiclient.CheckDecode(payload, &errs); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(payload, &errs); err != nil {
		return nil, err
	}
	return errs, nil
}

// maxReadBuffer bounds the read buffer a session keeps between messages:
// a larger message is read into a buffer of its own.
const maxReadBuffer = 64 << 10

// readMessage is the websocket.Conn's ReadMessage, reading into s.rbuf
// instead of a new buffer per message. A message larger than
// maxReadBuffer is left to the caller alone: s.rbuf is then nil.
func (s *session) readMessage() (int, []byte, error) {
	typ, r, err := s.conn.NextReader()
	if err != nil {
		return typ, nil, err
	}
	b := s.rbuf[:0]
	s.rbuf = nil
	if b == nil {
		b = make([]byte, 0, 4<<10)
	}
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // let append grow the buffer
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			if cap(b) <= maxReadBuffer {
				s.rbuf = b
			}
			return typ, b, nil
		}
		if err != nil {
			return typ, nil, err
		}
	}
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
		case gqlws.CloseUnauthorized, gqlws.CloseForbidden:
			if strings.HasPrefix(ce.Text, "token ") {
				// The relay closed a running session: its token was
				// revoked or expired, and no retry can make it work.
				return &RefusedError{reason: fmt.Sprintf("%s (%d): log in again (`relay login`) or pass another --token", ce.Text, ce.Code)}
			}
			return &RefusedError{reason: fmt.Sprintf("%d %s (check --token and --endpoint)", ce.Code, ce.Text)}
		}
		return apiclient.ClosedError(ce)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no message from server within %s", s.a.readTimeout)
	}
	return err
}

// receivesCopies tells whether the relay last said (see roleLoop) that
// this agent receives copies of sv's deliveries rather than answering
// their senders; false while no role is known (Options.Roles off).
func (s *session) receivesCopies(sv *served) bool {
	s.roleMu.Lock()
	defer s.roleMu.Unlock()
	for i, primary := range s.roles {
		if x, ok := s.served[subscriptionID(i)]; ok && x == sv {
			return !primary
		}
	}
	return false
}
