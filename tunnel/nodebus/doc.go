// Package nodebus carries forward commands between relay nodes: a
// Watermill Bus on NATS core (NewNATSBus; JetStream disabled, so a forward
// is never redelivered), or in one process for tests (NewBus). It has the
// shape of Watermill's components/requestreply: each node's Hub takes
// commands on its own topic (Serve hands them to tunnel.Hub.Receive), each
// Client gets replies on its own, and a reply is matched to its caller by
// the attempt ID. The receiving node acknowledges a command at once; a
// Client sends it again until acknowledged, since NATS core loses a
// message published while a connection moves to another server. Commands
// and replies use a compact binary encoding (wire.go).
package nodebus
