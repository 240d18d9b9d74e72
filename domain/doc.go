// Package domain is the pure core of the relay: the event catalogue, the
// aggregates that decide which events happen (Inspector, Endpoint, Delivery,
// Account), their invariants, and the EventStore port the adapters implement.
//
// It performs no I/O and imports no framework, driver or transport, so every
// rule here is testable with plain values and every adapter is replaceable.
//
// # Event catalogue
//
// Each event has an explicit, versioned type name that never derives from a Go
// type name, so renaming a struct never breaks a stored log:
//
//	inspector.created.v1    InspectorCreated     a guest inspector was opened
//	inspector.expired.v1    InspectorExpired     it went idle past its TTL
//	account.created.v1      AccountCreated       someone signed up
//	token.issued.v1         TokenIssued          an API token was issued (hash only)
//	token.revoked.v1        TokenRevoked         an API token stopped working
//	token.used.v1           TokenUsed            a token was used (at most about once a minute), on "tokenuse-<account id>"
//	account.snapshot.v1     AccountSnapshot      the account's tokens, members, invites and quota, as its stream folds them so far
//	device.code_requested.v1 DeviceCodeRequested a device asked to log in (code hashes only, and the client network that asked)
//	device.approved.v1      DeviceApproved       a signed-in person approved its user code
//	device.denied.v1        DeviceDenied         … or denied it
//	device.redeemed.v1      DeviceRedeemed       the device received its token; the code is used up
//	invite.created.v1       InviteCreated        an invite to sign up was made (code hash only)
//	invite.used.v1          InviteUsed           it created an account; it is spent
//	endpoint.created.v1     EndpointCreated      an account created an Endpoint
//	endpoint.reconfigured.v1 EndpointReconfigured its settings changed
//	endpoint.deleted.v1     EndpointDeleted      it was deleted; its address answers 503
//	endpoint.smee_key_set.v1 EndpointSmeeKeySet  its smee stream key was issued (hash only) or revoked
//	agent.connected.v1      AgentConnected       an agent session started serving an Endpoint
//	agent.disconnected.v1   AgentDisconnected    that session ended
//	listener.primary_changed.v1 PrimaryChanged   another session of the Endpoint answers senders
//	listener.snapshot.v1    ListenersSnapshot    the Endpoint's open sessions and primary, as its agent stream folds them so far
//	delivery.received.v1    DeliveryReceived     a request reached a known address (with forward: and its first attempt began)
//	delivery.answered.v1    DeliveryAnswered     the sender got this status
//	forward.requested.v1    ForwardRequested     an attempt to reach the local target began
//	forward.responded.v1    ForwardResponded     the local target answered
//	forward.failed.v1       ForwardFailed        the attempt failed (502, 503, 504)
//	retry.requested.v1      RetryRequested       a user asked to replay a stored delivery
//	inspector.purged.v1     InspectorPurged      an expired inspector's deliveries are removed (retention)
//	endpoint.retained.v1    EndpointRetained     an Endpoint's deliveries older than its window are removed
//	address.rate_limited.v1 AddressRateLimited   N requests to an address were refused by its rate limit
//	inspector.answer_set.v1 InspectorAnswerSet   an inspector's own answer and handshakes changed
//	$stream.deleted.v1      StreamDeleted        the store's tombstone of a deleted stream
//
// A request the relay answers itself as it arrives (inspectors, LOG
// Endpoints, refusals) is one delivery.received.v1 carrying that answer in
// its optional "answer" field: one event per delivery on the hottest path.
// delivery.answered.v1 records answers decided later (a forward that got no
// outcome in time). The field was added without a version change, since a
// reader that ignores it loses nothing an older log had.
//
// Streams are one per aggregate: "inspector-<id>", "endpoint-<id>",
// "account-<id>", "delivery-<id>", "agent-<endpoint id>",
// "refusals-<address>" for an address's rate-limit counts, "device-<id>" for
// a device login code, "invite-<id>" for an invite to sign up and
// "tokenuse-<account id>" for the uses of an account's tokens, which no
// decision reads.
//
// Removal is a decision in the log too: inspector.purged.v1 records it, then
// EventStore.DeleteStream removes each delivery stream and leaves a
// $stream.deleted.v1 tombstone in its place (see docs/retention.md).
package domain
