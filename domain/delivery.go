package domain

import (
	"errors"
	"fmt"
)

// Delivery invariants:
//  1. A delivery is received once, at a known address, with a method and a
//     raw request target that starts with "/" (or is "*" for OPTIONS).
//  2. len(Body) <= BodySize, and Complete only when the body was stored
//     whole (len(Body) == BodySize). A body cut short by a failed read is
//     stored as far as it arrived and is not complete, whatever its size.
//  3. An attempt is answered at most once: a response or a failure for an
//     attempt that is not pending raises no event.
//  4. A retry needs an Endpoint in PROXY or QUEUE mode, a connected agent and a
//     complete payload (the whole body and every header stored), checked in
//     that order.
//  5. DroppedHeaders is never negative.
//  6. A delivery has at most MaxDeliveryAttempts attempts (copies given to
//     other sessions apart): a retry or a queued attempt past them is
//     refused, and so is a redrive of a delivery that has had them, or
//     that has been redriven MaxDeliveryRedrives times.
//  7. Only a dead delivery is put back in its queue (Requeue).
//  8. A delivery records at most MaxDeliveryCopies copies: a copy past them
//     is refused (ErrCopyLimit).

// MaxDeliveryAttempts bounds the attempts of one delivery: its first, its
// retries and its queued attempts. Twice the most a queue policy allows per
// run (MaxQueueAttempts), so a queued delivery that died after a full run
// may be redriven for a second one; a person retrying by hand stops long
// before. Every reader of a delivery (its history, explanations, evidence,
// comparisons) reads its whole stream, which this bounds.
const MaxDeliveryAttempts = 2 * MaxQueueAttempts

// MaxDeliveryCopies bounds the copies one delivery records: what its
// attempts gave the Endpoint's other listeners (as many as its listeners,
// up to --max-endpoint-sessions, at every attempt). Every copy is an
// attempt of the delivery's own in the log and in the views, read with it
// by every page of its history, its live rows and its explanation, so
// MaxDeliveryAttempts alone did not bound what a delivery holds: 64
// listeners made each attempt 64 rows, and one delivery 12 800.
const MaxDeliveryCopies = MaxDeliveryAttempts

// ErrCopyLimit refuses a copy of a delivery that has recorded
// MaxDeliveryCopies copies.
var ErrCopyLimit = fmt.Errorf("delivery has recorded the most copies a delivery may (%d)", MaxDeliveryCopies)

// MaxDeliveryRedrives bounds how often one delivery is put back in its
// queue. A delivery that dies of its age spends no attempt, and a redrive
// restarts its age: without this bound a redrive every maxAge (1 min at
// least) grew its stream by two events each time, for as long as the
// account went on, past any storage quota (which counts what was
// received and answered, not these decisions).
const MaxDeliveryRedrives = MaxQueueAttempts

// ErrAttemptLimit matches the refusal of an attempt past
// MaxDeliveryAttempts (AttemptLimitError).
var ErrAttemptLimit = errors.New("delivery has had the most attempts a delivery may have")

// AttemptLimitError refuses an attempt of a delivery that has had
// MaxDeliveryAttempts, or a redrive of one redriven MaxDeliveryRedrives
// times (Redrives set). It is invalid input to whoever asked for it.
type AttemptLimitError struct{ Attempts, Redrives int }

func (e *AttemptLimitError) Error() string {
	if e.Redrives > 0 {
		return fmt.Sprintf("this delivery has been put back in its queue %d times, the most one delivery may be (%d); it stays dead", e.Redrives, MaxDeliveryRedrives)
	}
	return fmt.Sprintf("this delivery has had %d attempts, the most one delivery may have (%d); no more are made", e.Attempts, MaxDeliveryAttempts)
}

// Is makes errors.Is(err, ErrAttemptLimit) and errors.Is(err,
// ErrInvalidInput) true.
func (e *AttemptLimitError) Is(target error) bool {
	return target == ErrAttemptLimit || target == ErrInvalidInput
}

// RedriveLimitError refuses a redrive of an Endpoint whose dead deliveries
// have each had MaxDeliveryAttempts or MaxDeliveryRedrives: none is put
// back. It is invalid input to whoever asked for it.
type RedriveLimitError struct{ Deliveries int }

func (e *RedriveLimitError) Error() string {
	if e.Deliveries == 1 {
		return fmt.Sprintf("nothing put back: the dead delivery has had %d attempts or %d redrives, the most one delivery may have; it stays dead",
			MaxDeliveryAttempts, MaxDeliveryRedrives)
	}
	return fmt.Sprintf("nothing put back: the %d dead deliveries have each had %d attempts or %d redrives, the most one delivery may have; they stay dead",
		e.Deliveries, MaxDeliveryAttempts, MaxDeliveryRedrives)
}

// Is makes errors.Is(err, ErrAttemptLimit) and errors.Is(err,
// ErrInvalidInput) true.
func (e *RedriveLimitError) Is(target error) bool {
	return target == ErrAttemptLimit || target == ErrInvalidInput
}

// CapturedRequest is a request exactly as the sender sent it.
type CapturedRequest struct {
	Method string
	Target string // raw request target: path and query exactly as sent
	Host   string
	Proto  string
	// RemoteAddr is the sender: the socket's peer, or the client a trusted
	// proxy names (then Peer is that proxy).
	RemoteAddr string
	Peer       string
	// Scheme is "https" or "http": how the sender reached the public URL
	// (over TLS to the relay, or as a trusted proxy tells).
	Scheme   string
	Headers  []Header
	Body     []byte
	BodySize int64
	Complete bool
	// DroppedHeaders counts header values received but not stored (past
	// the relay's header limits); Headers holds the others.
	DroppedHeaders int
	// RedactedQuery names the query parameters whose values Target holds
	// as REDACTED: a secret of the address's (Meta's hub.verify_token in
	// its verification request), never recorded.
	RedactedQuery []string
	BodyUnread    bool     // reading stopped before the body's end (413): BodySize counts what was read
	Trailers      []Header // trailer fields after a chunked body, as sent
}

// Delivery is one request to a public address and what became of it.
type Delivery struct {
	aggregate
	id        string
	address   string
	kind      AddressKind
	accountID string
	complete  bool
	answered  bool
	pending   map[string]bool // attempt IDs that have no outcome yet
	// settled: a queued delivery delivered or dead (and not redriven
	// since); the queue sends it no more attempts.
	settled bool
	// dead: its latest queue decision gave it up (DeliveryDead), and no
	// redrive put it back since; only such a delivery may be requeued.
	dead bool
	// attempts counts its attempts, copies apart (MaxDeliveryAttempts).
	attempts int
	// copies counts the copies it recorded (MaxDeliveryCopies).
	copies int
	// redrives counts the times it was put back (MaxDeliveryRedrives).
	redrives int
}

// ReceiveDelivery records a request that reached address.
func ReceiveDelivery(id, address string, kind AddressKind, accountID string, req CapturedRequest) (*Delivery, error) {
	return receive(id, address, kind, accountID, req, nil)
}

// ReceiveAndAnswer records a request that the relay answered itself as it
// received it, with status and reason, in a single DeliveryReceived.
func ReceiveAndAnswer(id, address string, kind AddressKind, accountID string, req CapturedRequest, status int, reason string) (*Delivery, error) {
	if status < 100 || status > 999 {
		return nil, &InvalidInputError{Field: "status", Reason: fmt.Sprintf("%d is not an HTTP status", status)}
	}
	return receive(id, address, kind, accountID, req, &ReceiptAnswer{Status: status, Reason: reason})
}

func receive(id, address string, kind AddressKind, accountID string, req CapturedRequest, answer *ReceiptAnswer) (*Delivery, error) {
	switch {
	case id == "":
		return nil, &InvalidInputError{Field: "delivery id", Reason: "empty"}
	case address == "":
		return nil, &InvalidInputError{Field: "address", Reason: "empty"}
	case req.Method == "":
		return nil, &InvalidInputError{Field: "method", Reason: "empty"}
	case req.Target == "" || (req.Target[0] != '/' && req.Target != "*"):
		return nil, &InvalidInputError{Field: "target", Reason: fmt.Sprintf("%q is not an origin-form request target", req.Target)}
	case int64(len(req.Body)) > req.BodySize:
		return nil, &InvalidInputError{Field: "body", Reason: "stored body longer than its size"}
	case req.Complete && int64(len(req.Body)) != req.BodySize:
		return nil, &InvalidInputError{Field: "complete", Reason: "true although the body is not stored whole"}
	case req.DroppedHeaders < 0:
		return nil, &InvalidInputError{Field: "dropped headers", Reason: "negative"}
	}
	d := &Delivery{aggregate: newAggregate()}
	headers := req.Headers
	if headers == nil {
		headers = []Header{}
	}
	body := req.Body
	if body == nil {
		body = []byte{}
	}
	d.raise(DeliveryReceived{
		DeliveryID: id, Address: address, AddressKind: kind, AccountID: accountID,
		Method: req.Method, Target: req.Target, Host: req.Host, Proto: req.Proto,
		RemoteAddr: req.RemoteAddr, Peer: req.Peer, Scheme: req.Scheme, Headers: headers, Body: body,
		BodySize: req.BodySize, Complete: req.Complete, DroppedHeaders: req.DroppedHeaders, RedactedQuery: req.RedactedQuery, BodyUnread: req.BodyUnread,
		Trailers: req.Trailers, Answer: answer, Provider: DetectProvider(headers, body, req.Complete),
	})
	return d, nil
}

// LoadDelivery rebuilds a delivery from its stream.
func LoadDelivery(events []Event) *Delivery {
	d := &Delivery{aggregate: newAggregate()}
	d.Fold(events)
	return d
}

// Fold applies the events that follow the ones d was loaded from, in
// revision order, as LoadDelivery would have. Of a ForwardResponded it
// needs the attempt ID only: a caller may leave its headers and body out.
func (d *Delivery) Fold(events []Event) {
	for _, e := range events {
		d.apply(e)
		d.loaded()
	}
}

// Clone returns a copy of a delivery loaded from the store (its changes
// are not copied) that can be folded further or changed alone.
func (d *Delivery) Clone() *Delivery {
	c := *d
	c.changes = nil
	if d.pending != nil {
		c.pending = make(map[string]bool, len(d.pending))
		for id := range d.pending {
			c.pending[id] = true
		}
	}
	return &c
}

func (d *Delivery) raise(e Event) { d.apply(e); d.changes = append(d.changes, e) }

func (d *Delivery) apply(e Event) {
	switch e := e.(type) {
	case DeliveryReceived:
		if e.Forward != nil { // its request, and maybe the answer, in one event
			for _, x := range Expand(e) {
				d.apply(x)
			}
			return
		}
		d.id, d.address, d.kind, d.accountID = e.DeliveryID, e.Address, e.AddressKind, e.AccountID
		d.complete = e.Complete && e.DroppedHeaders == 0
		d.answered = e.Answer != nil
		d.pending = nil // made by the first attempt: most deliveries have none
	case DeliveryAnswered:
		d.answered = true
	case ForwardRequested:
		d.addPending(e.AttemptID)
		if e.Copy {
			d.copies++
		} else {
			d.attempts++
		}
	case ForwardResponded:
		delete(d.pending, e.AttemptID)
	case ForwardFailed:
		delete(d.pending, e.AttemptID)
	case DeliveryDelivered:
		d.settled = true
	case DeliveryDead:
		d.settled, d.dead = true, true
	case DeliveryRequeued:
		d.settled, d.dead = false, false
		d.redrives++
	}
}

// ResumeAttempt returns a delivery that knows only that attemptID was
// requested by the event at revision, which is enough to record that
// attempt's outcome without replaying the stream. Its Expected() is
// Exact(revision): if anything was appended since, the append is refused
// and the caller replays the stream with LoadDelivery instead.
func ResumeAttempt(deliveryID, attemptID string, revision uint64) *Delivery {
	d := &Delivery{aggregate: aggregate{version: int64(revision)}, id: deliveryID, pending: map[string]bool{attemptID: true}}
	return d
}

// ID names the delivery.
func (d *Delivery) ID() string                    { return d.id }
func (d *Delivery) Answered() bool                { return d.answered }
func (d *Delivery) Pending(attemptID string) bool { return d.pending[attemptID] }

// Copies is how many copies the delivery has recorded (MaxDeliveryCopies).
func (d *Delivery) Copies() int { return d.copies }

// Answer records the status the sender got; only the first answer counts.
func (d *Delivery) Answer(status int, reason string) {
	if d.answered {
		return
	}
	d.raise(DeliveryAnswered{DeliveryID: d.id, Status: status, Reason: reason})
}

// RequestForward starts an attempt to reach the Endpoint's local target.
func (d *Delivery) RequestForward(attemptID, endpointID string, retry bool) error {
	if attemptID == "" {
		return &InvalidInputError{Field: "attempt id", Reason: "empty"}
	}
	if d.pending[attemptID] {
		return nil
	}
	d.raise(ForwardRequested{DeliveryID: d.id, AttemptID: attemptID, EndpointID: endpointID, Retry: retry})
	return nil
}

// RequestForwardAtReceipt starts the first attempt of a delivery not yet
// recorded: its DeliveryReceived carries the request (Forward), so the
// receipt and the request are one event. For a delivery already recorded
// it is RequestForward.
func (d *Delivery) RequestForwardAtReceipt(attemptID, endpointID string) error {
	if attemptID == "" {
		return &InvalidInputError{Field: "attempt id", Reason: "empty"}
	}
	r, ok := d.receipt()
	if !ok || r.Answer != nil {
		return d.RequestForward(attemptID, endpointID, false)
	}
	r.Forward = &ReceiptForward{AttemptID: attemptID, EndpointID: endpointID}
	d.changes[0] = r
	d.addPending(attemptID)
	return nil
}

// RespondAtReceipt records r, the answer to the attempt a receipt not yet
// appended requests (RequestForwardAtReceipt), in that receipt: one event
// then records the receipt, its request and the answer. It reports false,
// changing nothing, when d is anything else (then RecordResponse records r
// as an event of its own).
func (d *Delivery) RespondAtReceipt(r ForwardResponded) bool {
	if d.version >= 0 || len(d.changes) != 1 {
		return false
	}
	rc, ok := d.changes[0].(DeliveryReceived)
	if !ok || rc.Forward == nil || rc.Forward.Responded != nil || rc.Forward.AttemptID != r.AttemptID || r.Copy {
		return false
	}
	f := *rc.Forward // a copy: the caller's receipt is not changed
	r.DeliveryID = d.id
	f.Responded = &r
	rc.Forward = &f
	d.changes[0] = rc
	delete(d.pending, r.AttemptID)
	return true
}

func (d *Delivery) addPending(attemptID string) {
	if d.pending == nil {
		d.pending = map[string]bool{}
	}
	d.pending[attemptID] = true
}

// receipt is the DeliveryReceived of a delivery whose only change is it.
func (d *Delivery) receipt() (DeliveryReceived, bool) {
	if d.version >= 0 || len(d.changes) != 1 {
		return DeliveryReceived{}, false
	}
	r, ok := d.changes[0].(DeliveryReceived)
	return r, ok && r.Forward == nil
}

// RequestCopy starts a copy of the delivery given to agentID, a session
// that is not the Endpoint's primary: its outcome never answers the sender.
func (d *Delivery) RequestCopy(attemptID, endpointID, agentID string) error {
	switch {
	case attemptID == "":
		return &InvalidInputError{Field: "attempt id", Reason: "empty"}
	case agentID == "":
		return &InvalidInputError{Field: "agent id", Reason: "empty"}
	case d.pending[attemptID]:
		return nil
	case d.copies >= MaxDeliveryCopies:
		return ErrCopyLimit
	}
	d.raise(ForwardRequested{DeliveryID: d.id, AttemptID: attemptID, EndpointID: endpointID, Copy: true, AgentID: agentID})
	return nil
}

// RecordResponse stores the local answer of a pending attempt.
func (d *Delivery) RecordResponse(r ForwardResponded) {
	if !d.pending[r.AttemptID] {
		return
	}
	r.DeliveryID = d.id
	d.raise(r)
}

// RecordFailure stores the failure of a pending attempt.
func (d *Delivery) RecordFailure(f ForwardFailed) {
	if !d.pending[f.AttemptID] {
		return
	}
	f.DeliveryID = d.id
	d.raise(f)
}

// EndpointStatus is what a retry needs to know about the delivery's Endpoint.
type EndpointStatus struct {
	Mode           EndpointMode
	AgentConnected bool
}

// RequestRetry replays the delivery to the local target as a new attempt,
// changed by edit when it is not nil (the recorded request stays as it was).
func (d *Delivery) RequestRetry(attemptID, accountID string, ep EndpointStatus, edit *RequestEdit) error {
	switch {
	case d.kind != AddressEndpoint || (ep.Mode != ModeProxy && ep.Mode != ModeQueue):
		return ErrRetryNotProxy
	case !ep.AgentConnected:
		return ErrAgentNotConnected
	case !d.complete:
		return ErrPayloadIncomplete
	case d.attempts >= MaxDeliveryAttempts:
		return &AttemptLimitError{Attempts: d.attempts}
	}
	d.raise(RetryRequested{DeliveryID: d.id, AttemptID: attemptID, AccountID: accountID})
	if edit != nil && edit.Empty() {
		edit = nil
	}
	d.raise(ForwardRequested{DeliveryID: d.id, AttemptID: attemptID, EndpointID: d.address, Retry: true, Edit: edit})
	return nil
}
