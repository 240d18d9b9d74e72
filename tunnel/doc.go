// Package tunnel holds agent sessions and carries forward commands to them.
//
// Ingress and retry forward through one seam, Hub.Forward(ctx, cmd). When
// this process holds a session of the command's Endpoint, the Hub serves it
// directly: it picks the primary session (the others that match get
// copies), gives it the work, and waits for the agent's answer
// (Hub.Complete or Hub.Claim), the command's timeout, or the session's
// end. It then records ForwardResponded or ForwardFailed (through its
// Recorder) and only after that durable append returns the outcome, so no
// caller ever sees an outcome the log does not hold. Nothing is encoded on
// this path.
//
// Commands cross the node boundary only through Remote (package
// tunnel/nodebus carries them on NATS core; this package imports neither
// NATS nor Watermill, so a single node and the API build without them). A
// Hub configured with Remote and Locate sends a command for an Endpoint
// whose sessions another node holds to that node; commands other nodes
// send here arrive through Receive, which acknowledges each at once and
// runs it once, however often it arrives. A Hub configured with a Roster
// (the open sessions of every live node, from the log's views) applies the
// primary rule and the listeners' filters to the sessions of every node:
// it sends the attempt to the primary's node naming that session
// (ForwardCommand.Agent), and a copy to every other matching session, here
// or on its node (ForwardCommand.Copy), whose outcome comes back and is
// recorded by this node after the primary's. When the node a command went to is lost before it
// replies (its lease lapsed: Hub.NodeLost), or the command cannot be sent,
// the sending node settles the attempt itself (Recorder.SettleOutcome):
// exactly one outcome is recorded, and the sender gets the one that stands.
//
// Outcomes the relay decides itself:
//
//	503 "no agent connected"                        no live session for the Endpoint
//	503 "agent disconnected"                        the session ended mid-flight
//	503 "relay shutting down"                       the Hub closed mid-flight
//	503 "relay node lost (<node>)"                  the node serving it lost its lease
//	503 "relay node unreachable (<node>)"           the command could not be sent to it
//	503 "relay node busy: body budget (<node>)"     no room for its request in that node's body budget
//	504 "local target did not answer within <t>"    no answer before the command's timeout
//	502 <the agent's error text>                    the agent could not reach its target
//
// Sessions are recorded in the agent stream of their Endpoint
// (AgentConnected, AgentDisconnected); CloseStale ends the sessions a crashed
// process left open in the log. A session that ends takes no more work, but
// stays in the Hub until its end is in the log: a command no other session
// takes meanwhile waits for that end (bounded by its timeout) before it is
// answered 503 "no agent connected", so the log holds the end first. So
// does one for a lost node's session, which the Roster shows Ending until
// a reaper's CloseStale has recorded its end. After each start or end the node that
// recorded it asks its Recorder to record the Endpoint's new primary
// (ReconcilePrimary): decided from that stream, appended at its revision,
// so recorded once however many nodes decide.
package tunnel
