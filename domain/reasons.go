package domain

// Reasons the relay records for what it decided itself: why it answered a
// sender (ReceiptAnswer.Reason, DeliveryAnswered.Reason), why an attempt
// ended without a local answer (ForwardFailed.Error), and why an agent
// session ended (AgentDisconnected.Reason). They are stored in the log
// forever and explanations read them back (package explain), so a text
// never changes once written; a new decision gets a new constant. A
// constant that ends in a space or names a prefix is followed by a detail,
// given with it.
const (
	// ReasonWrongProtocol: a plain-HTTP request where the address's public
	// URL is https, answered 503 at receipt.
	ReasonWrongProtocol = "wrong protocol: plain HTTP"
	// ReasonBodyBudget: the request bodies in flight (forwarded, or being
	// recorded) held the body budget (--proxy-body-budget) or the share of
	// it the sender, its network or the account may hold, answered 503 at
	// receipt.
	ReasonBodyBudget = "body budget"
	// ReasonBodyTooLarge + "<n> bytes": a proxied body over --max-body,
	// answered 413 at receipt.
	ReasonBodyTooLarge = "request body larger than "
	// ReasonBodyStalled + the read error: the body stopped arriving
	// (--body-timeout), answered 408 at receipt.
	ReasonBodyStalled = "request body stalled: "
	// ReasonBodyUnreadable + the read error: the body could not be read
	// (a malformed chunked encoding), answered 400 at receipt.
	ReasonBodyUnreadable = "request body unreadable: "
	// ReasonNoOutcome + the error: no outcome of the attempt reached the
	// sender's request in time, answered 504 later (DeliveryAnswered).
	ReasonNoOutcome = "no outcome from the tunnel: "
	// ReasonOutcomeNotRecorded + the error: the attempt ran (the local target
	// may have answered) but the log did not take its outcome; the sender
	// was answered 503 "store unavailable" (DeliveryAnswered, recorded if
	// the log takes it by then).
	ReasonOutcomeNotRecorded = "outcome not recorded: "
	// ReasonConfiguredAnswer: the address answered its configured answer
	// (an Endpoint's or inspector's answer setting), at receipt.
	ReasonConfiguredAnswer = "configured answer"
	// ReasonHandshake + the handshake's name (HandshakeSlackName, …): a
	// provider's verification request the relay answered itself, at
	// receipt, without forwarding it.
	ReasonHandshake = "handshake: "
	// ReasonFiltered + why: no listener's filters (nor the Endpoint's)
	// matched the delivery; answered as a LOG Endpoint answers, at receipt.
	ReasonFiltered = "filtered: "
	// ReasonUnansweredHandshake + the handshake (HandshakeSlack, …): an
	// inspector or LOG Endpoint received what looks like that provider's
	// verification request but does not enable its handshake, and answered
	// it as any other request. It follows the reason of that answer, after
	// "; ", when there is one (see UnansweredHandshake).
	ReasonUnansweredHandshake = "unanswered handshake: "
)

// Names of the handshakes as recorded after ReasonHandshake.
const (
	HandshakeSlackName     = "Slack URL verification"
	HandshakeMetaName      = "Meta verification"
	HandshakeMetaWrongName = "Meta verification refused (wrong verify token)"
	HandshakeGraphName     = "Microsoft Graph validation"
	HandshakeDropboxName   = "Dropbox verification"
	HandshakeZoomName      = "Zoom URL validation"
)

// FailureCopyDropped: the copy's session had no room for it in its queue,
// or the copies in flight (its session's, its account's, the relay's) had
// no room for its bytes;
// it was not sent (503, never the sender's answer).
const FailureCopyDropped = "copy dropped: listener busy"

// FailureCopyAnswerLost: a copy ran on another relay node, whose reply
// with the listener's answer was lost on the bus; asked again, that node
// no longer held the answer (it keeps them only as its body budget has
// room) (503, never the sender's answer).
const FailureCopyAnswerLost = "copy's answer lost between relay nodes"

// Failures of an attempt the relay decided (ForwardFailed.Error); any other
// error is the agent's report of its local target.
const (
	// FailureNoAgent: no agent session of the Endpoint took the forward (503).
	FailureNoAgent = "no agent connected"
	// FailureAgentDisconnected: the session that took the forward ended
	// before the local answer (503).
	FailureAgentDisconnected = "agent disconnected"
	// FailureShuttingDown: the relay stopped before the local answer (503).
	FailureShuttingDown = "relay shutting down"
	// FailureTimeout + the forward timeout ("30s"): the local answer did not
	// come within --forward-timeout (504).
	FailureTimeout = "local target did not answer within "
	// FailureNodeLost + " (<node>)": the node holding the agent's session
	// stopped answering on the bus, its lease lapsed (503).
	FailureNodeLost = "relay node lost"
	// FailureNodeUnreachable + " (<node>)": the forward could not be sent
	// to the node holding the agent's session (503).
	FailureNodeUnreachable = "relay node unreachable"
	// FailureNodeBodyBudget + " (<node>)": the node holding the agent's
	// session, which the forward was sent to, held its whole body budget
	// (--proxy-body-budget), or the account's share of it, in requests;
	// the forward was not given to the agent (503).
	FailureNodeBodyBudget = "relay node busy: body budget"
	// FailureRestarted: the relay process that waited for the local answer
	// ended; its next start closed the attempt (503).
	FailureRestarted = "relay restarted before the local answer"
	// FailureNodeLostBeforeAnswer: the node whose sender waited for the
	// local answer was lost; another node closed the attempt (503).
	FailureNodeLostBeforeAnswer = "relay node lost before the local answer"
	// FailureInvalidStatus + the status: the agent reported a status no
	// sender can be given (502).
	FailureInvalidStatus = "agent reported invalid status "
)

// Why an agent session ended (AgentDisconnected.Reason).
const (
	// SessionAgentDisconnected: the agent's connection or subscription ended.
	SessionAgentDisconnected = "agent disconnected"
	// SessionRelayRestarted: the relay process holding it ended; its next
	// start closed the session.
	SessionRelayRestarted = "relay restarted"
	// SessionNodeLost: the node holding it was lost; another node closed it.
	SessionNodeLost = "relay node lost"
)
