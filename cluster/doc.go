// Package cluster is what several relay nodes sharing one log and one NATS
// bus know of each other: each node's name (NodeID, kept in its data
// folder) and which nodes are alive (Leases: heartbeats on NATS core).
// Where agent sessions are is not kept here: the log records it
// (domain.AgentConnected.Node) and every node's views read it.
package cluster
