// Package esdb is the EventStoreDB adapter of the relay's event store port,
// for deployments that outgrow one machine. It uses the official client
// (github.com/EventStore/EventStore-Client-Go/v4) and passes the same
// conformance suite as the embedded SQLite store (eventstore/storetest)
// whenever RELAY_EVENTSTORE_URL names a server.
//
// # Mapping
//
//   - Streams, revisions and event IDs are EventStoreDB's own: the port was
//     shaped after them. The port's expected revisions map to the client's
//     in one function, expectedRevision.
//   - A position packs the commit position of the event's append in $all
//     with the event's index in that append (position.go): commit positions
//     are byte offsets shared by every event of one multi-event append,
//     while the port's positions strictly increase. Reads and subscriptions
//     resume at the start of the append that holds their position, so
//     resuming inside an append loses nothing and repeats nothing.
//   - Reads and subscriptions of $all skip system events (types and streams
//     starting with "$"); the port never writes them.
//   - Metadata travels as JSON in the event's user metadata, OccurredAt in
//     UTC with nanoseconds; data is stored as JSON content when it is valid
//     JSON and as binary otherwise, byte for byte either way.
//   - Each event carries the leaf and link of the log's chain per stream at
//     the end of its user metadata, and a chained append expects the exact
//     revision of the head it chains to; a deletion first records what it
//     removes (chain.go, docs/evidence.md). Not run against a server here.
//   - Errors are translated once, by the client's ErrorCode (translate):
//     WrongExpectedVersion becomes *domain.WrongExpectedRevisionError (with
//     the stream's actual revision read back), ResourceNotFound and
//     StreamDeleted become domain.ErrStreamNotFound.
//
// # Differences from the embedded store
//
// EventStoreDB detects a retried append only at the same place in the same
// stream, and with Any only on a best-effort basis; an event ID reused in
// another stream is not refused. Positions strictly increase but are not
// gap-free. The user in the
// connection string must be allowed to read $all (an admin by default).
package esdb
