// Package tunnel holds agent sessions and carries forward commands to them.
//
// Ingress and retry hand a domain.ForwardCommand to a Client. The Client
// publishes it on a Watermill Pub/Sub (GoChannel inside one process) with the
// attempt ID as correlation ID and waits for the reply. The Hub's router
// handler picks a live session of the command's Endpoint (round-robin when
// several agents serve it), gives it the work, and waits for the agent's
// answer (Hub.Complete), the command's timeout, or the session's end. It then
// appends ForwardResponded or ForwardFailed to the delivery's stream and only
// after that durable append publishes the reply, so no caller ever sees an
// outcome the log does not hold.
//
// Outcomes the relay decides itself:
//
//	503 "no agent connected"                        no live session for the Endpoint
//	503 "agent disconnected"                        the session ended mid-flight
//	504 "local target did not answer within <t>"    no answer before the command's timeout
//	502 <the agent's error text>                    the agent could not reach its target
//
// Sessions are recorded in the agent stream of their Endpoint
// (AgentConnected, AgentDisconnected); CloseStale ends the sessions a crashed
// process left open in the log.
package tunnel
