package domain

import "time"

// ForwardCommand asks the tunnel to take one attempt of a delivery to the
// Endpoint's local target through a connected agent. Body is the whole
// request body (up to the max-body limit), not only the stored part.
type ForwardCommand struct {
	DeliveryID      string        `json:"delivery_id"`
	AttemptID       string        `json:"attempt_id"`
	EndpointID      string        `json:"endpoint_id"`
	AccountID       string        `json:"account_id"`
	Method          string        `json:"method"`
	Target          string        `json:"target"` // raw request target as sent
	Headers         []Header      `json:"headers"`
	Body            []byte        `json:"body"`
	Timeout         time.Duration `json:"timeout"`
	CaptureResponse bool          `json:"capture_response"`
	CorrelationID   string        `json:"correlation_id"`
	// RequestEventID and RequestRevision name the ForwardRequested event of
	// this attempt in the delivery stream, so the outcome can be appended
	// right after it without replaying the stream (see ResumeAttempt).
	// Empty RequestEventID: unknown, replay the stream.
	RequestEventID  string `json:"request_event_id,omitempty"`
	RequestRevision uint64 `json:"request_revision,omitempty"`
	// Host, Scheme and RemoteAddr are what the sender called and who it
	// is, as recorded: the agent tells the local process (X-Forwarded-*,
	// Forwarded). Empty for a delivery recorded before they were kept.
	Host       string `json:"host,omitempty"`
	Scheme     string `json:"scheme,omitempty"`
	RemoteAddr string `json:"remote_addr,omitempty"`
	// Agent names the session that is to run the attempt, when the node
	// that sends it to another has applied the primary rule across nodes;
	// Copy says it is a copy for that session (its outcome goes back to
	// the sending node, which records it). Empty: the receiving node
	// applies the rule to its own sessions.
	Agent string `json:"agent,omitempty"`
	Copy  bool   `json:"copy,omitempty"`
	// Sent is the relay's digests of the request (DigestRequest), taken
	// once when a delivery's copies are given: a copy lets go of its
	// headers and body before its outcome is recorded and keeps these
	// instead (one value shared by the delivery's copies). nil: digest the
	// request when the outcome is recorded. Never sent between nodes: the
	// copy's outcome is recorded by the node that gave it.
	Sent *FidelityDigests `json:"-"`
	// CopiesRecorded is how many copies the delivery had recorded when
	// the attempt was requested: the node that gives the attempt's copies
	// gives no more than the delivery may still record (MaxDeliveryCopies),
	// counting with them the copies it gave since and has not recorded
	// yet. Never sent between nodes: the node the command starts on gives
	// its copies.
	CopiesRecorded int `json:"-"`
}

// FirstAttempt reports whether c is the attempt a delivery's receipt
// requests (its request event is the receipt, at revision 0), the one its
// sender waits for: not a retry, a queued attempt or a copy.
func (c ForwardCommand) FirstAttempt() bool { return !c.Copy && c.RequestRevision == 0 }

// ForwardOutcome is how an attempt ended: the local answer (Error empty), or
// the status the relay answers itself (502, 503, 504) with the reason.
type ForwardOutcome struct {
	AttemptID string   `json:"attempt_id"`
	Status    int      `json:"status"`
	Headers   []Header `json:"headers"`
	Body      []byte   `json:"body"`
	Error     string   `json:"error,omitempty"`
	// Failure is a short, stable text for the sender when Error is set: it
	// names the target, never the local socket; Error keeps the detail for
	// the Endpoint's owner.
	Failure    string `json:"failure,omitempty"`
	DurationMs int64  `json:"duration_ms"`
	AgentID    string `json:"agent_id,omitempty"`
	// Signature is the agent's verdict on the request's provider
	// signature ("" for none); only the verdict, never the secret.
	Signature string `json:"signature,omitempty"`
	// Receipt is the agent's digests of the request it handed to the local
	// process (see fidelity.go), nil when it reported none.
	Receipt *FidelityDigests `json:"receipt,omitempty"`
	// Position is where the log holds the event recording this outcome,
	// once recorded; 0 when it raised no event (already recorded). Readers
	// of the views wait for it, not for the end of the whole log.
	Position uint64 `json:"-"`
	// NotCaptured says why the relay let go of Body before recording the
	// outcome (NotCapturedBodyBudget), BodySize then being the size the
	// agent answered and DroppedHeaders the header values let go of too;
	// "" with BodySize 0 when Body is whole. Set where the outcome waits
	// to be recorded, never sent between nodes.
	NotCaptured    string `json:"-"`
	BodySize       int64  `json:"-"`
	DroppedHeaders int    `json:"-"`
}

// Failed reports whether the local target gave no answer.
func (o ForwardOutcome) Failed() bool { return o.Error != "" }
