// Package jetstream is the NATS JetStream adapter of the relay's event store
// port, for deployments that run NATS already or want a replicated log
// without EventStoreDB. It uses the official client
// (github.com/nats-io/nats.go/jetstream) and passes the same conformance
// suite as the embedded SQLite store (eventstore/storetest), in its tests
// against a NATS server embedded in the test process.
//
// # Mapping
//
//   - The whole log is one JetStream stream (Options.Stream, file storage,
//     no limits, message deletes denied, roll-ups allowed for
//     DeleteStream). Each event stream has its own
//     subject, <Options.Subject>.<name>, the name escaped into one subject
//     token (subjectToken).
//   - One append is one message: its events are packed into the body
//     (encodeBatch) with the stream name and the first event's revision. A
//     multi-event append is therefore atomic on every server version; the
//     batch headers of nats-server 2.12 are not needed.
//   - Expected revisions become Nats-Expected-Last-Subject-Sequence: the
//     subject sequence of the stream's newest message, or 0 for an empty
//     stream (expectedSubjectSeq). Any and StreamExists appends check it
//     too, because the revisions written into the message must stay dense;
//     when the stream moved on between the read and the write they read the
//     head again and retry.
//   - A position is message sequence × 1000 plus the event's place in the
//     last n places of that message's slot (position), so an append holds at
//     most 1000 events, every message's last event is at seq×1000+999, and
//     LastPosition follows from the stream's last sequence alone.
//   - Nats-Msg-Id is the append's first event ID. Within the stream's
//     duplicate window (Options.Duplicates) the server drops a repeat and
//     names the original message; the adapter reads it back and answers the
//     retry, or reports domain.ErrDuplicateEventID when that message is
//     another append. Outside the window a retry is recognised where
//     EventStoreDB recognises it: at the place NoStream or Exact names.
//   - Errors are translated once (translate), by JetStream API error code:
//     10071 and 10164 (a wrong last sequence, with and without the stream's
//     sequence; replicated streams return both) become
//     domain.ErrWrongExpectedRevision.
//   - DeleteStream is one conditional publish of the tombstone on the
//     stream's subject with Nats-Rollup: sub: the server stores it and
//     purges the subject's earlier messages in one step (delete.go). A
//     subject whose newest message is a tombstone is a deleted stream.
//   - Each message carries its events' hash chain, per event stream, in the
//     headers Relay-Leaf and Relay-Link, chained to the link of the stream's
//     newest message, which the expected subject sequence pins (chain.go);
//     a tombstone also lists the links it removes (Relay-Removed). Store
//     is an evidence.MessageSource, for checkpoints and verification
//     (docs/evidence.md).
//
// # Differences from the embedded store
//
// Positions have gaps. An event ID reused elsewhere is refused only within
// the duplicate window. Reads of a stream cost one request per message up
// to the revision asked for, and ReadAll one request per message.
package jetstream
