package domain

// Event is a payload of the catalogue. EventType returns its explicit,
// versioned type name; payload JSON is frozen by golden files in testdata/.
type Event interface {
	EventType() string
}

// Event type names. Never derive them from Go names: they are stored forever.
const (
	TypeInspectorCreated      = "inspector.created.v1"
	TypeInspectorExpired      = "inspector.expired.v1"
	TypeAccountCreated        = "account.created.v1"
	TypeTokenIssued           = "token.issued.v1"
	TypeTokenRevoked          = "token.revoked.v1"
	TypeTokenUsed             = "token.used.v1"
	TypeDeviceCodeRequested   = "device.code_requested.v1"
	TypeDeviceApproved        = "device.approved.v1"
	TypeDeviceDenied          = "device.denied.v1"
	TypeDeviceRedeemed        = "device.redeemed.v1"
	TypeInviteCreated         = "invite.created.v1"
	TypeInviteUsed            = "invite.used.v1"
	TypeMemberJoined          = "member.joined.v1"
	TypeMemberRemoved         = "member.removed.v1"
	TypeMemberRoleChanged     = "member.role_changed.v1"
	TypeMemberPasswordChanged = "member.password_changed.v1"
	TypeMemberInvited         = "member.invited.v1"
	TypeMemberInviteUsed      = "member.invite_used.v1"
	TypeLoginClaimed          = "login.claimed.v1"
	TypeLoginReleased         = "login.released.v1"
	TypeEndpointCreated       = "endpoint.created.v1"
	TypeEndpointReconfigured  = "endpoint.reconfigured.v1"
	TypeEndpointDeleted       = "endpoint.deleted.v1"
	TypeEndpointSmeeKeySet    = "endpoint.smee_key_set.v1"
	TypeAgentConnected        = "agent.connected.v1"
	TypeAgentDisconnected     = "agent.disconnected.v1"
	TypePrimaryChanged        = "listener.primary_changed.v1"
	TypeListenersSnapshot     = "listener.snapshot.v1"
	TypeDeliveryReceived      = "delivery.received.v1"
	TypeDeliveryAnswered      = "delivery.answered.v1"
	TypeForwardRequested      = "forward.requested.v1"
	TypeForwardResponded      = "forward.responded.v1"
	TypeForwardFailed         = "forward.failed.v1"
	TypeRetryRequested        = "retry.requested.v1"
	TypeInspectorPurged       = "inspector.purged.v1"
	TypeEndpointRetained      = "endpoint.retained.v1"
	TypeAddressRateLimited    = "address.rate_limited.v1"
	TypeLogCheckpointed       = "log.checkpointed.v1"
	TypeInspectorAnswerSet    = "inspector.answer_set.v1"
	TypeAccountQuotaSet       = "account.quota_set.v1"
	TypeAccountSnapshot       = "account.snapshot.v1"
	// The queue's events (delivery.retry_scheduled.v1, delivery.dead.v1,
	// delivery.delivered.v1, delivery.requeued.v1) are in queue.go.
	// TypeStreamDeleted is written by the event store itself, never by an
	// aggregate: the tombstone DeleteStream leaves in place of a stream's
	// events (EventStoreDB's "$streamDeleted"). The "$" marks it as the
	// store's own.
	TypeStreamDeleted = "$stream.deleted.v1"
)

// Header is one header line. A header sent several times appears as several
// Headers with the same Name, in the order they were sent. Value holds the
// bytes as sent, which need not be UTF-8 (HTTP allows obs-text); its JSON
// form keeps them (see MarshalJSON).
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AddressKind tells which aggregate owns a public address.
type AddressKind string

const (
	AddressInspector AddressKind = "inspector"
	AddressEndpoint  AddressKind = "endpoint"
)

// InspectorCreated opens a guest inspector with an idle TTL.
type InspectorCreated struct {
	InspectorID string `json:"inspector_id"`
	IdleTTLMs   int64  `json:"idle_ttl_ms"`
	// Smee makes the address speak smee.io's protocol too: a GET asking
	// for text/event-stream opens a stream of its deliveries instead of
	// being recorded (docs/smee.md). Absent in older events: false.
	Smee bool `json:"smee,omitempty"`
	// Network is the client network (IPv4 /24, IPv6 /48) that created the
	// inspector: its inspectors together hold at most a share of the
	// relay's storage for guests (GuestStorage). Absent in older events and
	// when the client's address is unknown: counted in the whole only.
	Network string `json:"network,omitempty"`
}

// InspectorExpired closes an inspector that went idle past its TTL.
type InspectorExpired struct {
	InspectorID    string `json:"inspector_id"`
	LastActivityAt string `json:"last_activity_at"` // RFC 3339, nanoseconds
}

// InspectorAnswerSet carries an inspector's complete new own answer
// (answer.go): nil groups are the defaults.
type InspectorAnswerSet struct {
	InspectorID string      `json:"inspector_id"`
	Answer      *Answer     `json:"answer,omitempty"`
	Handshakes  *Handshakes `json:"handshakes,omitempty"`
}

// AccountCreated records a sign-up.
type AccountCreated struct {
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	// Origin is how the account was made (AccountOrigin*): one made by
	// open sign-up shares the relay's storage for sign-ups (SignupStorage)
	// until the operator gives it a storage quota of its own. Absent in
	// older events: counted in that storage's whole, as an open sign-up.
	Origin string `json:"origin,omitempty"`
	// Network is the client network (IPv4 /24, IPv6 /48) that signed up,
	// open sign-ups only: its accounts together hold at most a share of
	// the storage for sign-ups. Absent in older events and when the
	// client's address is unknown: counted in the whole only.
	Network string `json:"network,omitempty"`
}

// How an account was made (AccountCreated.Origin).
const (
	AccountOriginOpen     = "open"     // signUp on a relay whose sign-up is open
	AccountOriginInvite   = "invite"   // signUp with an invite
	AccountOriginOperator = "operator" // relay accounts create, the admin API
)

// AccountFrom is how an account is made: AccountCreated's Origin and
// Network.
type AccountFrom struct {
	Origin  string
	Network string
}

// AccountQuotaSet records the operator's quota override of an account,
// on the account's stream so every node reads the same one from its
// views. StorageBytes: -1 the relay's --account-storage, 0 unlimited,
// otherwise the bytes its deliveries may take in the log. Rate: "" the
// relay's --account-rate, "off" unlimited, otherwise "N/UNIT[,burst=B]".
// APICost, added without a version change (absent in older events: the
// default), is the GraphQL cost points its operations may spend, read like
// Rate against the relay's --account-api-cost.
type AccountQuotaSet struct {
	AccountID    string `json:"account_id"`
	StorageBytes int64  `json:"storage_bytes"`
	Rate         string `json:"rate"`
	APICost      string `json:"api_cost,omitempty"`
}

// TokenIssued records an API token by its SHA-256 hash only. Name and
// ExpiresAt were added without a version change: a token issued before
// them has no name (read as "first token") and never expires.
type TokenIssued struct {
	AccountID string `json:"account_id"`
	TokenID   string `json:"token_id"`
	TokenHash string `json:"token_hash"` // hex SHA-256 of the token
	Name      string `json:"name,omitempty"`
	ExpiresAt string `json:"expires_at,omitempty"` // RFC 3339; empty: never
	// MemberID is the member the token acts for and who made it; empty
	// for tokens made before members existed or by a token without one.
	MemberID string `json:"member_id,omitempty"`
	// Kind is TokenKindSession for a browser's sign-in; empty: an API token.
	Kind string `json:"kind,omitempty"`
}

// TokenKindSession marks the token behind a browser's session cookie.
const TokenKindSession = "session"

// TokenRevoked stops a token from authenticating. By is the member who
// revoked it ("" when unknown: a token without a member, sign-out).
type TokenRevoked struct {
	AccountID string `json:"account_id"`
	TokenID   string `json:"token_id"`
	By        string `json:"by,omitempty"`
}

// MemberJoined records a person who may sign in to the account: a login
// unique on the relay (as typed; compared without case), a role, and the
// password's argon2id hash in PHC form sealed under the relay's secrets key
// (PasswordSealed), never the password nor the plain hash: whoever reads
// the log cannot guess the password offline. PasswordHash, the plain hash,
// is held only by events written before hashes were sealed (see
// docs/accounts.md). By is the member who let them in ("" for the account's
// first owner); InviteID the member invite they used, if any.
type MemberJoined struct {
	AccountID      string `json:"account_id"`
	MemberID       string `json:"member_id"`
	Login          string `json:"login"`
	Role           string `json:"role"`
	PasswordHash   string `json:"password_hash,omitempty"`
	PasswordSealed string `json:"password_sealed,omitempty"`
	By             string `json:"by,omitempty"`
	InviteID       string `json:"invite_id,omitempty"`
}

// MemberRemoved records that a member may no longer sign in; their tokens
// are revoked by TokenRevoked events of the same append.
type MemberRemoved struct {
	AccountID string `json:"account_id"`
	MemberID  string `json:"member_id"`
	By        string `json:"by"`
}

// MemberRoleChanged records a member's new role.
type MemberRoleChanged struct {
	AccountID string `json:"account_id"`
	MemberID  string `json:"member_id"`
	Role      string `json:"role"`
	By        string `json:"by"`
}

// MemberPasswordChanged records a member's new password, as its argon2id
// hash in PHC form sealed under the relay's secrets key (PasswordSealed),
// never the password nor the plain hash; PasswordHash is held only by
// events written before hashes were sealed. The member's other sessions
// are revoked in the same append.
type MemberPasswordChanged struct {
	AccountID      string `json:"account_id"`
	MemberID       string `json:"member_id"`
	PasswordHash   string `json:"password_hash,omitempty"`
	PasswordSealed string `json:"password_sealed,omitempty"`
}

// MemberInvited records a one-time link to join the account, by its
// code's SHA-256 only.
type MemberInvited struct {
	AccountID string `json:"account_id"`
	InviteID  string `json:"invite_id"`
	CodeHash  string `json:"code_hash"`
	Role      string `json:"role"`
	By        string `json:"by"`
	ExpiresAt string `json:"expires_at"` // RFC 3339
}

// MemberInviteUsed records that a member invite was spent by MemberID.
type MemberInviteUsed struct {
	AccountID string `json:"account_id"`
	InviteID  string `json:"invite_id"`
	MemberID  string `json:"member_id"`
}

// LoginClaimed takes a login for a member, on the login's own stream,
// whose expected revision keeps a login unique on the relay even when two
// nodes race.
type LoginClaimed struct {
	AccountID string `json:"account_id"`
	MemberID  string `json:"member_id"`
}

// LoginReleased frees a login (its member was removed, or never joined).
type LoginReleased struct {
	AccountID string `json:"account_id"`
	MemberID  string `json:"member_id"`
}

// TokenUsed records that a token was used, at most about once a minute per
// token (not once per request): what "last used" shows. It is appended to
// the account's token-use stream (TokenUseStream), which no decision reads;
// logs written before hold it on the account's stream.
type TokenUsed struct {
	AccountID string `json:"account_id"`
	TokenID   string `json:"token_id"`
	At        string `json:"at"` // RFC 3339, nanoseconds
}

// DeviceCodeRequested opens a device code (RFC 8628), by the hashes of
// its device code and user code only.
type DeviceCodeRequested struct {
	DeviceID       string `json:"device_id"`
	DeviceCodeHash string `json:"device_code_hash"` // hex SHA-256
	UserCodeHash   string `json:"user_code_hash"`   // hex SHA-256 of the normal user code
	ClientName     string `json:"client_name"`      // the device's hostname: its token's name
	ExpiresAt      string `json:"expires_at"`       // RFC 3339
	// Network is the client network (IPv4 /24, IPv6 /48) that asked: its
	// codes waiting together hold at most DeviceCodeNetworkShare of the
	// relay's. Absent in older events and when the client's address is
	// unknown: counted in the whole only.
	Network string `json:"network,omitempty"`
}

// DeviceApproved records that a signed-in person let the device in;
// MemberID is that person, when they signed in as a member: the device's
// token acts for them.
type DeviceApproved struct {
	DeviceID  string `json:"device_id"`
	AccountID string `json:"account_id"`
	MemberID  string `json:"member_id,omitempty"`
}

// DeviceDenied records that a signed-in person refused the device.
type DeviceDenied struct {
	DeviceID  string `json:"device_id"`
	AccountID string `json:"account_id"`
}

// DeviceRedeemed records that the device received its token (issued by a
// TokenIssued of the account): the code is used up.
type DeviceRedeemed struct {
	DeviceID  string `json:"device_id"`
	AccountID string `json:"account_id"`
	TokenID   string `json:"token_id"`
}

// InviteCreated records an invite to sign up, by its code's hash only.
type InviteCreated struct {
	InviteID  string `json:"invite_id"`
	CodeHash  string `json:"code_hash"`            // hex SHA-256
	CreatedBy string `json:"created_by,omitempty"` // the inviting account; empty: the operator
	ExpiresAt string `json:"expires_at"`           // RFC 3339
}

// InviteUsed records the account an invite created; it is spent.
type InviteUsed struct {
	InviteID  string `json:"invite_id"`
	AccountID string `json:"account_id"`
}

// EndpointMode is LOG (record and answer 204) or PROXY (record and forward).
type EndpointMode string

const (
	ModeLog   EndpointMode = "LOG"
	ModeProxy EndpointMode = "PROXY"
)

// EndpointCreated opens an account's Endpoint.
type EndpointCreated struct {
	EndpointID      string       `json:"endpoint_id"`
	AccountID       string       `json:"account_id"`
	Name            string       `json:"name"`
	Mode            EndpointMode `json:"mode"`
	Target          string       `json:"target,omitempty"`
	ResponseCapture bool         `json:"response_capture"`
	// Answer and Handshakes (answer.go) were added without a version
	// change: older events have neither, and none is what they mean.
	Answer     *Answer     `json:"answer,omitempty"`
	Handshakes *Handshakes `json:"handshakes,omitempty"`
	// Filters were added without a version change: older Endpoints
	// forward every delivery.
	Filters []Filter `json:"filters,omitempty"`
	// RetentionMs is how long the Endpoint keeps its deliveries, in
	// milliseconds; 0 (and older events, which have none): the relay's
	// default window (added without a version change).
	RetentionMs int64 `json:"retention_ms,omitempty"`
	// Queue is a QUEUE Endpoint's policy (nil: the defaults). Added
	// without a version change.
	Queue *QueuePolicy `json:"queue,omitempty"`
	// By is the member who made the change (added without a version
	// change: "" in older events, and for a token without a member).
	By string `json:"by,omitempty"`
}

// EndpointReconfigured carries an Endpoint's complete new settings.
type EndpointReconfigured struct {
	EndpointID      string       `json:"endpoint_id"`
	Name            string       `json:"name"`
	Mode            EndpointMode `json:"mode"`
	Target          string       `json:"target,omitempty"`
	ResponseCapture bool         `json:"response_capture"`
	// Answer and Handshakes (answer.go) were added without a version
	// change: older events have neither, and none is what they mean.
	Answer     *Answer     `json:"answer,omitempty"`
	Handshakes *Handshakes `json:"handshakes,omitempty"`
	// Filters were added without a version change: older Endpoints
	// forward every delivery.
	Filters []Filter `json:"filters,omitempty"`
	// RetentionMs is how long the Endpoint keeps its deliveries, in
	// milliseconds; 0 (and older events, which have none): the relay's
	// default window (added without a version change).
	RetentionMs int64 `json:"retention_ms,omitempty"`
	// Queue is a QUEUE Endpoint's policy (nil: the defaults). Added
	// without a version change.
	Queue *QueuePolicy `json:"queue,omitempty"`
	// By is the member who made the change (added without a version
	// change: "" in older events, and for a token without a member).
	By string `json:"by,omitempty"`
}

// EndpointDeleted closes an Endpoint; its address answers 503 from then on.
type EndpointDeleted struct {
	EndpointID string `json:"endpoint_id"`
	// By is the member who deleted it (added without a version change:
	// "" in older events, and for a token without a member).
	By string `json:"by,omitempty"`
}

// EndpointSmeeKeySet gives an Endpoint a new key for smee's event stream
// (docs/smee.md), or takes it away: KeyHash is the SHA-256 of the key, hex;
// "" revokes it. The key itself is shown once and never stored.
type EndpointSmeeKeySet struct {
	EndpointID string `json:"endpoint_id"`
	KeyHash    string `json:"key_hash,omitempty"`
	By         string `json:"by,omitempty"` // the member who set it ("" for none)
}

// AgentConnected records an agent session starting to serve an Endpoint.
// Node names the relay node that holds the session (empty in logs written
// before nodes were named: a single process held every session), so any
// node can route a forward to it and close it when that node is gone.
type AgentConnected struct {
	EndpointID string `json:"endpoint_id"`
	AgentID    string `json:"agent_id"`
	Target     string `json:"target,omitempty"`
	Node       string `json:"node,omitempty"`
	// Primary says the session asked to answer senders (relay listen
	// --primary); Filters are its filters' text forms (ParseFilter). Both
	// were added without a version change: older sessions asked neither.
	Primary bool     `json:"primary,omitempty"`
	Filters []string `json:"filters,omitempty"`
}

// PrimaryChanged records which session of an Endpoint answers senders
// from now on (AgentID, "" when none is left) and why (Primary* reasons):
// the other sessions get copies. Previous is the session that did before
// ("" for none).
type PrimaryChanged struct {
	EndpointID string `json:"endpoint_id"`
	AgentID    string `json:"agent_id"`
	Previous   string `json:"previous,omitempty"`
	Reason     string `json:"reason"`
}

// AccountSnapshot is an account's stream folded up to the event before it
// (Account): what the account's decisions read, and nothing they do not.
// Tokens are the unrevoked ones in the order they were issued (the oldest
// session is the one a new one beyond MaxSessions ends); members the
// current ones; invites the member invites neither used nor expired when
// it was taken; Quota the latest override, if any. It is appended when a
// command finds many events since the last one (Account.Snapshot), so that
// a command reads the stream from the newest snapshot on, not the account's
// whole history. Folding it replaces what was folded before.
type AccountSnapshot struct {
	AccountID string              `json:"account_id"`
	Name      string              `json:"name"`
	Tokens    []AccountTokenState `json:"tokens,omitempty"`
	Members   []MemberState       `json:"members,omitempty"`
	Invites   []MemberInviteState `json:"invites,omitempty"`
	Quota     *AccountQuotaSet    `json:"quota,omitempty"`
}

// AccountTokenState is an unrevoked token as an AccountSnapshot holds it.
type AccountTokenState struct {
	ID       string `json:"id"`
	MemberID string `json:"member_id,omitempty"`
	Session  bool   `json:"session,omitempty"`
}

// MemberState is a current member as an AccountSnapshot holds them.
type MemberState struct {
	ID   string `json:"id"`
	Role string `json:"role"`
}

// MemberInviteState is an open member invite as an AccountSnapshot holds it.
type MemberInviteState struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	By        string `json:"by,omitempty"`
	ExpiresAt string `json:"expires_at"` // RFC 3339
}

// ListenersSnapshot is an Endpoint's agent stream folded up to the event
// before it (Listeners): the sessions open, in the order they connected,
// and the primary last recorded (PrimaryChanged.AgentID, "" for none). It is
// appended at the stream's revision when a decision finds many events since
// the last one (Listeners.Snapshot), so that a node with nothing folded
// reads the stream from the newest snapshot on, not the Endpoint's whole
// history of sessions. Folding it replaces what was folded before.
type ListenersSnapshot struct {
	EndpointID string            `json:"endpoint_id"`
	Open       []ListenerSession `json:"open,omitempty"`
	Primary    string            `json:"primary,omitempty"`
}

// AgentDisconnected records the end of an agent session.
type AgentDisconnected struct {
	EndpointID string `json:"endpoint_id"`
	AgentID    string `json:"agent_id"`
	Reason     string `json:"reason,omitempty"`
}

// DeliveryReceived records a request exactly as it reached a known address.
// Body holds at most the capture cap; BodySize is the size the sender sent
// (every byte received is counted) and Complete tells whether Body is all
// of it. BodyUnread says the relay stopped reading before the body's end
// (a 413): BodySize then counts only what was read. Target may hold bytes
// that are not UTF-8; its JSON form keeps them (see MarshalJSON).
// DroppedHeaders counts header values past the relay's header limits,
// received (and forwarded) but not in Headers.
type DeliveryReceived struct {
	DeliveryID  string      `json:"delivery_id"`
	Address     string      `json:"address"`
	AddressKind AddressKind `json:"address_kind"`
	AccountID   string      `json:"account_id,omitempty"`
	Method      string      `json:"method"`
	Target      string      `json:"target"` // raw request target: path and query as sent
	Host        string      `json:"host"`
	Proto       string      `json:"proto"`
	RemoteAddr  string      `json:"remote_addr"`
	Headers     []Header    `json:"headers"`
	Body        []byte      `json:"body"`
	BodySize    int64       `json:"body_size"`
	Complete    bool        `json:"complete"`
	// DroppedHeaders was added without a version change: older events
	// have none, and zero is what they mean.
	DroppedHeaders int `json:"dropped_headers,omitempty"`
	// RedactedQuery (added without a version change; older events have
	// none) names the query parameters whose values the relay recorded as
	// REDACTED in Target: a secret of the address, as Meta's
	// hub.verify_token in a verification request the relay answered.
	RedactedQuery []string `json:"redacted_query,omitempty"`
	// BodyUnread and Trailers were added without a version change: older
	// events have neither (their body was read to its end or to the
	// max-body limit, and trailers were not kept).
	BodyUnread bool     `json:"body_unread,omitempty"`
	Trailers   []Header `json:"trailers,omitempty"`
	// Answer is the answer the relay gave on its own as it received the
	// request (an inspector's 204, a LOG Endpoint's, a refusal): one event
	// then records both. Nil when the answer came later, from a forward or
	// a DeliveryAnswered. Added without a version change: older events
	// simply have none.
	Answer *ReceiptAnswer `json:"answer,omitempty"`
	// Provider is the webhook provider the relay recognised at receipt
	// (DetectProvider), nil for none. Added without a version change.
	Provider *Provider `json:"provider,omitempty"`
	// Scheme ("https" or "http", as the sender used) and Peer (the trusted
	// proxy that named RemoteAddr as the sender) were added without a
	// version change: older events have neither, and RemoteAddr there is
	// always the socket's peer.
	Scheme string `json:"scheme,omitempty"`
	Peer   string `json:"peer,omitempty"`
	// Queued: a QUEUE Endpoint's delivery, answered at receipt and
	// forwarded later (docs/queue.md). Added without a version change.
	Queued bool `json:"queued,omitempty"`
	// Forward is the delivery's first attempt when it was requested as the
	// delivery was received (a PROXY Endpoint's): one event then records
	// both, where logs written before have a ForwardRequested right after.
	// Added without a version change.
	Forward *ReceiptForward `json:"forward,omitempty"`
}

// ReceiptForward is the first attempt a DeliveryReceived requests: what a
// ForwardRequested right after it would have said (ForwardRequested).
type ReceiptForward struct {
	AttemptID  string `json:"attempt_id"`
	EndpointID string `json:"endpoint_id"`
	// Node names the relay node whose sender waits for the attempt.
	Node string `json:"node,omitempty"`
	// Responded is the attempt's answer when it came before the receipt was
	// appended (record.ReceiptHold): one event then records the receipt, the
	// request and the answer, where otherwise a ForwardResponded follows.
	// Its DeliveryID and AttemptID are the receipt's and Forward's. Added
	// without a version change: older events have none.
	Responded *ForwardResponded `json:"responded,omitempty"`
}

// Requested is the ForwardRequested the receipt's first attempt stands for.
func (f ReceiptForward) Requested(deliveryID string) ForwardRequested {
	return ForwardRequested{DeliveryID: deliveryID, AttemptID: f.AttemptID, EndpointID: f.EndpointID, Node: f.Node}
}

// Expand returns the events e stands for, in the order a log written
// without them in one event holds them: a DeliveryReceived with a Forward
// is the receipt alone, the ForwardRequested of its Forward, then
// Forward.Responded; any other event is itself. Readers that go through a
// stream event by event read every shape alike through it.
func Expand(e Event) []Event {
	r, ok := e.(DeliveryReceived)
	if !ok || r.Forward == nil {
		return []Event{e}
	}
	f := r.Forward
	r.Forward = nil
	out := []Event{r, f.Requested(r.DeliveryID)}
	if f.Responded != nil {
		out = append(out, *f.Responded)
	}
	return out
}

// ReceiptAnswer is what the sender was answered at receipt.
type ReceiptAnswer struct {
	Status int    `json:"status"`
	Reason string `json:"reason,omitempty"` // why the service answered it itself
}

// DeliveryAnswered records what the sender was answered.
type DeliveryAnswered struct {
	DeliveryID string `json:"delivery_id"`
	Status     int    `json:"status"`
	Reason     string `json:"reason,omitempty"` // why the service answered it itself
}

// ForwardRequested starts an attempt to reach the Endpoint's local target.
type ForwardRequested struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id"`
	EndpointID string `json:"endpoint_id"`
	Retry      bool   `json:"retry"`
	// Node names the relay node whose sender waits for the attempt (empty
	// before nodes were named); when that node is gone, no one does.
	Node string `json:"node,omitempty"`
	// Edit is what a retry changed in the recorded request before sending
	// it (nil: sent as recorded).
	Edit *RequestEdit `json:"edit,omitempty"`
	// Copy marks a copy of the delivery given to a session that is not
	// the primary (AgentID): its outcome is recorded, never answered to the
	// sender. Added without a version change.
	Copy    bool   `json:"copy,omitempty"`
	AgentID string `json:"agent_id,omitempty"`
	// Queued marks an attempt of a queued delivery; PossibleDuplicate one
	// sent again after an earlier attempt was left open by a crash or a
	// lost node (the local process may have seen it). Added without a
	// version change.
	Queued            bool `json:"queued,omitempty"`
	PossibleDuplicate bool `json:"possible_duplicate,omitempty"`
}

// ForwardResponded records the local target's answer to an attempt.
// Body is kept only when the Endpoint captures responses.
type ForwardResponded struct {
	DeliveryID string   `json:"delivery_id"`
	AttemptID  string   `json:"attempt_id"`
	AgentID    string   `json:"agent_id,omitempty"`
	Status     int      `json:"status"`
	Headers    []Header `json:"headers"`
	Body       []byte   `json:"body,omitempty"`
	BodySize   int64    `json:"body_size"`
	Captured   bool     `json:"captured"`
	DurationMs int64    `json:"duration_ms"`
	// Signature is the verdict of a provider signature check the agent made
	// on the developer's machine (relay listen --verify: "stripe valid"),
	// "" for none. Added without a version change.
	Signature string `json:"signature,omitempty"`
	// Fidelity is the agent's receipt of what it handed to the local
	// process beside the relay's digests of what it sent (see
	// fidelity.go); nil when the agent reported none. Added without a
	// version change.
	Fidelity *Fidelity `json:"fidelity,omitempty"`
	// Copy: the outcome of a copy (see ForwardRequested.Copy); it does not
	// say what the sender got. Added without a version change.
	Copy bool `json:"copy,omitempty"`
	// DroppedHeaders counts header values the sender was answered with but
	// the log does not keep (past the bytes an event keeps of them, as for
	// a request's). Added without a version change: older events have
	// none, and zero is what they mean.
	DroppedHeaders int `json:"dropped_headers,omitempty"`
	// NotCaptured says why Body is not stored although the Endpoint
	// captures responses (NotCapturedStorageQuota); "" when it is stored or
	// the Endpoint does not capture them. Added without a version change:
	// older events have none.
	NotCaptured string `json:"not_captured,omitempty"`
}

// NotCapturedStorageQuota is why an answer's body is not stored
// (ForwardResponded.NotCaptured) when the account's stored bytes had
// reached its storage quota (--account-storage) as the answer was
// recorded. It says what became of a body, not why a delivery has its
// status, so it is not among the reasons explanations tell (reasons.go).
const NotCapturedStorageQuota = "storage quota exceeded"

// NotCapturedSignupStorage is why an answer's body is not stored when
// the account is in the relay's storage for sign-ups (InSignupStorage)
// and those accounts, or the ones its client network signed up, had
// reached their part of it (--signup-storage) as the answer was
// recorded: the account's own quota may have room.
const NotCapturedSignupStorage = "storage for sign-ups full"

// NotCapturedDiskReserve is why an answer's body is not stored while the
// relay's free disk is below its reserve (--min-free-disk).
const NotCapturedDiskReserve = "relay disk nearly full"

// NotCapturedBodyBudget is why a copy's answer is recorded without its
// body (ForwardResponded.NotCaptured): it came back while the copy waited
// for the primary's outcome to be recorded, and the body budget
// (--proxy-body-budget, the account's share) had no room to hold it
// meanwhile. Like NotCapturedStorageQuota it says what became of a body,
// not why a delivery has its status.
const NotCapturedBodyBudget = "body budget full while the primary's answer was awaited"

// ForwardFailed records an attempt that got no answer from the local target.
type ForwardFailed struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id"`
	AgentID    string `json:"agent_id,omitempty"`
	Status     int    `json:"status"` // what the sender is answered: 502, 503 or 504
	Error      string `json:"error"`
	DurationMs int64  `json:"duration_ms"`
	// Copy: the outcome of a copy (see ForwardRequested.Copy). Added
	// without a version change.
	Copy bool `json:"copy,omitempty"`
}

// RetryRequested records a user's request to replay a stored delivery.
type RetryRequested struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id"`
	AccountID  string `json:"account_id"`
}

// InspectorPurged is the decision to remove an expired inspector's
// deliveries from the log once its retention has passed: its delivery
// streams are deleted after it (each leaves a StreamDeleted tombstone) and
// the inspector's own stream, with this event, stays as the record.
type InspectorPurged struct {
	InspectorID    string `json:"inspector_id"`
	LastActivityAt string `json:"last_activity_at"` // RFC 3339, nanoseconds: its expiry ran from here
	RetentionMs    int64  `json:"retention_ms"`     // how long its deliveries were kept past expiry
	Deliveries     int64  `json:"deliveries"`       // delivery streams to delete
}

// EndpointRetained is the decision to remove an Endpoint's deliveries
// received before Cutoff, its retention window before the decision: the
// delivery streams are deleted after it (each leaves a StreamDeleted
// tombstone) and the Endpoint's stream, with this event, stays as the
// record. A delivery whose forward was still waiting is not counted and
// stays until a later decision.
type EndpointRetained struct {
	EndpointID     string `json:"endpoint_id"`
	RetentionMs    int64  `json:"retention_ms"`     // the window applied
	Cutoff         string `json:"cutoff"`           // RFC 3339, nanoseconds: deliveries received before it go
	LastActivityAt string `json:"last_activity_at"` // RFC 3339, nanoseconds: the newest delivery at the decision
	Deliveries     int64  `json:"deliveries"`       // delivery streams to delete
	// DeliveriesAtLeast: the count stopped at Deliveries, its bound, and
	// more go; the exact number is the tombstones that follow. Absent in
	// decisions before the bound, whose count was exact.
	DeliveriesAtLeast bool `json:"deliveries_at_least,omitempty"`
}

// AddressRateLimited counts requests to an address that its rate limit
// refused (429, not recorded as deliveries) between From and To. The relay
// appends at most one per address per interval, on the address's
// "refusals-<id>" stream, so a flood costs the log one small event.
type AddressRateLimited struct {
	Address     string      `json:"address"`
	AddressKind AddressKind `json:"address_kind"`
	Refused     int64       `json:"refused"`
	From        string      `json:"from"` // RFC 3339, nanoseconds: first refusal counted
	To          string      `json:"to"`   // RFC 3339, nanoseconds: last refusal counted
}

// StreamDeleted is the tombstone of a deleted stream: which stream went,
// how many events it held and up to which revision and position. Appends
// to the stream are refused from then on (domain.ErrStreamDeleted).
// LogCheckpointed is the relay's signature of the log's chain at a
// position (package evidence): Link is the chain's link at Position (hex),
// TreeSize and Root the Merkle tree over the chain's leaves up to it (Root
// in hex), Signature an Ed25519 signature (base64) of
// evidence.CheckpointMessage of them by
// the key whose public half is PublicKey ("ed25519:" and base64). Verifiers
// trust the public key they were given, not the one written here.
type LogCheckpointed struct {
	Position  uint64 `json:"position"`
	Link      string `json:"link"`
	TreeSize  uint64 `json:"tree_size"`
	Root      string `json:"root"`
	PublicKey string `json:"public_key"`
	Signature string `json:"signature"`
	// Chain is "stream-heads-v1" on a log with a chain per stream (the
	// checkpoint signs every stream's head; Link is empty), else empty.
	Chain string `json:"chain,omitempty"`
}

type StreamDeleted struct {
	Stream       string `json:"stream"`
	Events       int64  `json:"events"`
	LastRevision int64  `json:"last_revision"` // -1 when the stream held no event
	LastPosition uint64 `json:"last_position"` // 0 when the stream held no event
}

func (InspectorCreated) EventType() string      { return TypeInspectorCreated }
func (InspectorExpired) EventType() string      { return TypeInspectorExpired }
func (InspectorAnswerSet) EventType() string    { return TypeInspectorAnswerSet }
func (AccountCreated) EventType() string        { return TypeAccountCreated }
func (AccountQuotaSet) EventType() string       { return TypeAccountQuotaSet }
func (AccountSnapshot) EventType() string       { return TypeAccountSnapshot }
func (TokenIssued) EventType() string           { return TypeTokenIssued }
func (TokenRevoked) EventType() string          { return TypeTokenRevoked }
func (TokenUsed) EventType() string             { return TypeTokenUsed }
func (DeviceCodeRequested) EventType() string   { return TypeDeviceCodeRequested }
func (DeviceApproved) EventType() string        { return TypeDeviceApproved }
func (DeviceDenied) EventType() string          { return TypeDeviceDenied }
func (DeviceRedeemed) EventType() string        { return TypeDeviceRedeemed }
func (InviteCreated) EventType() string         { return TypeInviteCreated }
func (InviteUsed) EventType() string            { return TypeInviteUsed }
func (MemberJoined) EventType() string          { return TypeMemberJoined }
func (MemberRemoved) EventType() string         { return TypeMemberRemoved }
func (MemberRoleChanged) EventType() string     { return TypeMemberRoleChanged }
func (MemberPasswordChanged) EventType() string { return TypeMemberPasswordChanged }
func (MemberInvited) EventType() string         { return TypeMemberInvited }
func (MemberInviteUsed) EventType() string      { return TypeMemberInviteUsed }
func (LoginClaimed) EventType() string          { return TypeLoginClaimed }
func (LoginReleased) EventType() string         { return TypeLoginReleased }
func (EndpointCreated) EventType() string       { return TypeEndpointCreated }
func (EndpointReconfigured) EventType() string  { return TypeEndpointReconfigured }
func (EndpointDeleted) EventType() string       { return TypeEndpointDeleted }
func (EndpointSmeeKeySet) EventType() string    { return TypeEndpointSmeeKeySet }
func (AgentConnected) EventType() string        { return TypeAgentConnected }
func (AgentDisconnected) EventType() string     { return TypeAgentDisconnected }
func (PrimaryChanged) EventType() string        { return TypePrimaryChanged }
func (ListenersSnapshot) EventType() string     { return TypeListenersSnapshot }
func (DeliveryReceived) EventType() string      { return TypeDeliveryReceived }
func (DeliveryAnswered) EventType() string      { return TypeDeliveryAnswered }
func (ForwardRequested) EventType() string      { return TypeForwardRequested }
func (ForwardResponded) EventType() string      { return TypeForwardResponded }
func (ForwardFailed) EventType() string         { return TypeForwardFailed }
func (RetryRequested) EventType() string        { return TypeRetryRequested }
func (InspectorPurged) EventType() string       { return TypeInspectorPurged }
func (EndpointRetained) EventType() string      { return TypeEndpointRetained }
func (AddressRateLimited) EventType() string    { return TypeAddressRateLimited }
func (StreamDeleted) EventType() string         { return TypeStreamDeleted }
func (LogCheckpointed) EventType() string       { return TypeLogCheckpointed }
