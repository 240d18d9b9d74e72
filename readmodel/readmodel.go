package readmodel

import (
	"time"

	"github.com/relayhq/relay/domain"
)

// Inspector is the read model of a guest inspector.
type Inspector struct {
	ID             string
	CreatedAt      time.Time
	LastActivityAt time.Time // latest request, or CreatedAt before the first one
	ExpiresAt      time.Time // LastActivityAt + TTL
	TTL            time.Duration
	Expired        bool  // InspectorExpired was recorded
	Purged         bool  // retention removed its deliveries
	StoredBytes    int64 // log bytes its deliveries take (the quota counts these)
	Refused        int64 // requests its rate limit refused
	Answers        Answers
	Smee           bool // smee-compatible address (docs/smee.md)
}

// ExpiredAt reports whether the inspector is expired at now: its expiry was
// recorded, or it has been idle past its TTL. The log records an expiry only
// when a request finds the inspector idle, so a reader that went by Expired
// alone would show an idle inspector as alive until its next request.
func (i Inspector) ExpiredAt(now time.Time) bool {
	return i.Expired || !now.Before(i.ExpiresAt)
}

// Address is what ingress needs to route a request to an inspector or an
// Endpoint by its id. Fields that do not apply to the kind are zero.
type Address struct {
	ID              string
	Kind            domain.AddressKind
	AccountID       string
	Mode            domain.EndpointMode
	Target          string
	ResponseCapture bool
	Deleted         bool
	Expired         bool
	ExpiresAt       time.Time // inspectors only
	LastActivityAt  time.Time
	TTL             time.Duration // inspectors only
	StoredBytes     int64         // inspectors only: see Inspector.StoredBytes
	Answers         Answers
	Filters         []domain.Filter // Endpoints only: which deliveries are forwarded
	Smee            bool            // inspectors only: smee-compatible (docs/smee.md)
	// SmeeKeyHash is an Endpoint's smee stream key's SHA-256, hex ("" for
	// none): a stream request must name the key (docs/smee.md).
	SmeeKeyHash string
	// Network is the client network that created an inspector
	// (domain.InspectorCreated.Network); "" for Endpoints and none known.
	Network string
}

// Answers are an address's own answer and the handshakes it answers
// (domain/answer.go); nil is the default (204, none).
type Answers struct {
	Answer     *domain.Answer
	Handshakes *domain.Handshakes
}

// Attempt is one try to reach an Endpoint's local target.
type Attempt struct {
	ID         string
	Status     *int // nil while pending
	StartedAt  time.Time
	DurationMs *int64 // nil while pending
	Error      string
	Retry      bool
	// Late is an outcome that came after the relay had answered the sender
	// itself (a 504 when the local answer took too long): the local
	// process's answer, which the sender never got.
	Late bool
	// Edit is what an edited retry changed in the recorded request before
	// sending it; nil when it was sent as recorded. Its Body is not read
	// with the attempt: EditBodySize is the size of the body it sent
	// instead (nil: the recorded one), which AttemptEditBody reads.
	Edit         *domain.RequestEdit
	EditBodySize *int64
	// AgentID is the agent session its outcome names ("" when no agent
	// took it); Node the relay node whose sender waited for it ("" in logs
	// older than node names); OutcomeAt when its outcome was recorded
	// (zero while pending).
	AgentID   string
	Node      string
	OutcomeAt time.Time
	// Signature is the verdict of the provider signature check the agent
	// made (relay listen --verify), "" when none was made.
	Signature string
	// Copy: a copy given to a session that is not the primary (AgentID);
	// what the sender got is never a copy's outcome.
	Copy bool
	// Queued: sent by a QUEUE Endpoint's queue (docs/queue.md), not asked
	// for by a user; PossibleDuplicate: sent again after an earlier attempt
	// was left open by a crash, a shutdown or a lost node, so the local
	// process may have seen the delivery already.
	Queued            bool
	PossibleDuplicate bool
	// Fidelity compares the agent's receipt of what it handed to the local
	// process with what the relay sent; nil when the agent reported none.
	Fidelity *Fidelity
}

// Fidelity is an attempt's fidelity verdict.
type Fidelity struct {
	// Differences names the parts that differ (domain.PartRequestLine,
	// PartHeaders, PartBody), in that order; empty when none does.
	Differences []string
}

// RelayAnswer is an answer the relay gave a sender itself, as it received
// the request or later (a 504 when no outcome came in time), and why:
// Reason holds one of the domain's reasons (domain.ReasonWrongProtocol, …),
// "" for the plain 204 of an inspector or a LOG Endpoint.
type RelayAnswer struct {
	Status int
	Reason string
	At     time.Time
}

// Delivery is the read model of one recorded request and what became of it.
type Delivery struct {
	ID         string
	Address    string
	Kind       domain.AddressKind
	AccountID  string
	Method     string
	Target     string // raw request target as sent
	Host       string
	Proto      string
	RemoteAddr string
	Headers    []domain.Header // read from the log, as Body
	// DroppedHeaders counts header values received but not stored; read
	// from the log with Headers.
	DroppedHeaders int
	// RedactedQuery names the query parameters whose values Path holds as
	// REDACTED (a secret of the address's); read from the log.
	RedactedQuery []string
	Body          []byte
	BodySize      int64
	Complete      bool
	BodyUnread    bool            // read from the log, as Trailers
	Trailers      []domain.Header // trailer fields after a chunked body

	ReceivedAt time.Time
	// ResponseStatus is what the sender was answered: the status of the
	// latest attempt that has an outcome, else the answer the relay gave
	// itself (at receipt, or in a DeliveryAnswered).
	ResponseStatus *int
	// RelayAnswer is the latest answer the relay gave the sender itself,
	// nil when it gave none (every answer came from attempts).
	RelayAnswer     *RelayAnswer
	ResponseHeaders []domain.Header // from the latest ForwardResponded
	ResponseBody    []byte          // nil when not captured
	Attempts        []Attempt       // in time order
	// ResponseNotCaptured says why ResponseBody is nil although the
	// Endpoint captures responses (domain.ForwardResponded.NotCaptured).
	ResponseNotCaptured string

	// Provider is the webhook provider recognised at receipt, nil for
	// none; Duplicates counts the address's other deliveries with the
	// same provider id (the provider sent it again), up to a bound
	// (projections.MaxCountedDuplicates).
	Provider   *domain.Provider
	Duplicates int

	Position        uint64 // of the DeliveryReceived event; orders history
	UpdatedPosition uint64 // of the latest event that changed the delivery
	Cursor          string // opaque paging cursor of this delivery
}

// Page is one page of history, newest first.
type Page struct {
	Items       []Delivery
	HasNextPage bool
	EndCursor   string // cursor of the last item, "" for an empty page
	// SearchCut: a filtered page stopped reading headers and bodies from
	// the log at its byte budget before it was full; it holds the matches
	// found so far and EndCursor continues below the last delivery read.
	SearchCut bool
}

// Endpoint is the read model of an account's Endpoint.
type Endpoint struct {
	ID              string
	AccountID       string
	Name            string
	Mode            domain.EndpointMode
	Target          string
	ResponseCapture bool
	CreatedAt       time.Time
	Deleted         bool
	AgentCount      int   // open agent sessions serving it
	Refused         int64 // requests its rate limit refused
	Answers         Answers
	Filters         []domain.Filter
	// Retention is the Endpoint's own window (0: the relay's default);
	// RetainedTo the cutoff of its latest retention decision (zero: none).
	Retention  time.Duration
	RetainedTo time.Time
	SmeeKey    bool // a smee stream key is issued (docs/smee.md)
	// Queue is a QUEUE Endpoint's policy as last set (nil: the defaults),
	// so reading it costs a row of the views, not the Endpoint's stream.
	Queue *domain.QueuePolicy
}

// Account is the read model of an account.
type Account struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// AccountUsage is what an account stores and receives, with the
// operator's override of its quota.
type AccountUsage struct {
	AccountID   string
	Name        string
	StoredBytes int64 // log bytes its Endpoints' deliveries and its other streams take (the storage quota counts these)
	Deliveries  int64 // its Endpoints' deliveries the log holds
	// DeliveriesWindow counts those received since WindowStart (zero
	// when the read did not ask for it).
	DeliveriesWindow int64
	// StorageQuota, RateQuota and APICostQuota follow
	// domain.AccountQuotaSet: -1, "" and "" for the relay's defaults.
	StorageQuota int64
	RateQuota    string
	APICostQuota string
	// Origin and Network are how the account was made and the client
	// network that signed up (domain.AccountCreated; "" for older
	// accounts): with StorageQuota they say whether it counts in the
	// relay's storage for sign-ups (domain.InSignupStorage).
	Origin, Network string
}

// Token is an API token of an account, without its secret (the relay
// keeps only its hash).
type Token struct {
	ID        string
	AccountID string
	Name      string
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	LastUsed  time.Time // zero: never used (or not since it was recorded)
	MemberID  string    // the member it acts for; "": none (made before members, or by a token without one)
	Kind      string    // domain.TokenKindSession, or "" for an API token
}

// Member is a person who may sign in to an account.
type Member struct {
	ID        string
	AccountID string
	Login     string
	Role      string // "owner" or "member"
	// PasswordHash is the password's argon2id hash (PHC form) as the log
	// holds it: sealed under the relay's secrets key ("aes256gcm:v1:…"),
	// or plain from events written before hashes were sealed. Only the
	// sign-in check reads it.
	PasswordHash string
	JoinedAt     time.Time
}

// MemberInvite is a one-time link to join an account.
type MemberInvite struct {
	ID        string
	AccountID string
	Role      string
	ExpiresAt time.Time
	UsedBy    string
}

// Activity is one change to an account, and who made it.
type Activity struct {
	Position uint64
	At       time.Time
	Type     string // the event's type name
	By       string // a member id; "" unknown
	Subject  string // the member, token or invite changed
	Detail   string // a role, a token's name, a login
}

// DeviceCode is a device code (RFC 8628) as the views hold it.
type DeviceCode struct {
	ID         string
	ClientName string
	Status     string // DevicePending, DeviceApproved, DeviceDenied or DeviceRedeemed
	AccountID  string // who decided; "" while pending
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// The statuses of a DeviceCode.
const (
	DevicePending  = "pending"
	DeviceApproved = "approved"
	DeviceDenied   = "denied"
	DeviceRedeemed = "redeemed"
)

// Expired reports whether the token's expiry has passed at now.
func (t Token) Expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// AgentSession is an agent session serving an Endpoint, from its
// AgentConnected to its AgentDisconnected.
type AgentSession struct {
	AgentID     string
	EndpointID  string
	Target      string
	ConnectedAt time.Time
	Node        string // the relay node holding it; empty in logs older than node names
	// DisconnectedAt is when it ended, zero while it is open; Reason why
	// (one of the domain's Session... reasons).
	DisconnectedAt time.Time
	Reason         string
	// Asked says it started with --primary; Filters are its filters' text
	// forms; Position is the log position of its start, the order the
	// primary rule reads sessions in. Filled by OpenListeners.
	Asked    bool
	Filters  []string
	Position uint64
}

// NodeSessions counts the open agent sessions of an Endpoint one relay node
// holds.
type NodeSessions struct {
	Node     string
	Sessions int
}

// Change tells a watcher that a delivery of its address was created (New) or
// updated by a committed batch; Position is the latest event that touched it.
//
// Behind, with no delivery, is the last note of a watcher that fell too far
// behind and was dropped (see projections.History.Watch): what changed
// since must be read again, and watched anew.
type Change struct {
	DeliveryID string
	Position   uint64
	New        bool
	Behind     bool
}

// Health is what the views' runner reports about itself.
type Health struct {
	Position uint64 // the checkpoint
	// Err is why the last batch failed; nil while the views follow the log.
	// The runner keeps retrying, so it clears by itself once its cause does.
	Err error
	// FailingSince is when the current run of failures began (zero when Err
	// is nil); Retries counts the tries since.
	FailingSince time.Time
	Retries      int
}

// EventRef locates one event of the log.
type EventRef struct {
	Position uint64
	Stream   string
	Revision uint64
}

// OpenAttempt is an attempt that was requested and has no outcome yet.
type OpenAttempt struct {
	DeliveryID string
	AttemptID  string
	Node       string // the node whose sender waits for it; empty in logs older than node names
}

// PurgeCandidate is a guest inspector whose retention has run out and whose
// deliveries are not purged yet.
type PurgeCandidate struct {
	ID             string
	LastActivityAt time.Time
	TTL            time.Duration
	Deliveries     int64 // delivery rows it has
}

// RetentionCandidate is an Endpoint holding deliveries older than its
// retention window.
type RetentionCandidate struct {
	ID             string
	LastActivityAt time.Time
	Window         time.Duration // the window applied
	Deliveries     int64         // deliveries past it, none waiting on a forward
	// DeliveriesAtLeast: Deliveries is where the count stopped (its
	// bound), and there are more.
	DeliveriesAtLeast bool
}

// DeliveryFilter narrows an address's history: a delivery is listed when
// every field set matches. The zero value matches everything.
type DeliveryFilter struct {
	Method      string // exact, as sent
	Path        string // exact, without the query string
	PathPrefix  string // the request target starts with it (case-sensitive)
	Status      int    // the answer the sender got; 0: any
	StatusClass int    // 1 to 5: 1xx to 5xx; 0: any
	Pending     bool   // no answer yet
	// AttemptStatus: some attempt to reach the local target got it.
	AttemptStatus  int
	ReceivedAfter  time.Time // inclusive; zero: no bound
	ReceivedBefore time.Time // exclusive; zero: no bound
	IncompleteBody bool      // the body was stored in part (over the capture cap) or not read
	// RefusedOffline: the sender was answered 503 because no agent was
	// connected, and no attempt since reached the local target.
	RefusedOffline bool
	// Read from the log, so a page examines fewer deliveries:
	Header         string // a header with this name (case-insensitive)…
	HeaderValue    string // …and exactly this value, when set
	BodyContains   string // the stored body holds these bytes
	DroppedHeaders bool   // some header values were not stored
	// Provider ids, recognised at receipt (kept in the views):
	ProviderEvent      string // the provider's event type, exactly
	ProviderDeliveryID string // the provider's id of the delivery: its redeliveries
}

// NeedsLog reports whether matching reads what only the log holds.
func (f DeliveryFilter) NeedsLog() bool {
	return f.Header != "" || f.HeaderValue != "" || f.BodyContains != "" || f.DroppedHeaders
}

// AttemptResponse is what one attempt got back: the local process's
// answer (Body only when the Endpoint captures responses), or the relay's
// own status and Error when the attempt failed.
type AttemptResponse struct {
	Status   int
	Headers  []domain.Header
	Body     []byte
	Captured bool
	// BodySize is the captured body's size; Encoded the body as the log
	// holds it (base64), when it was read but not decoded (over the read's
	// bound): equal bodies have equal encodings.
	BodySize int64
	Encoded  []byte
	// NotRead says why this response was not read with the others (one
	// read's bounds, projections.MaxAttemptResponseBytes, or the API
	// answer's LogBudget: NotReadLogBudget): only Status is set, from the
	// views.
	NotRead string
	Error   string
	// NotCaptured says why Body is not stored although the Endpoint
	// captures responses (domain.ForwardResponded.NotCaptured).
	NotCaptured string
}
