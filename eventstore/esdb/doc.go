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
//   - A position is the event's commit position in $all. Positions grow with
//     the log but are byte offsets, so they have gaps; events written by one
//     multi-event append can share one commit position. ReadAll therefore
//     never ends a page inside such a group (unless the group alone is
//     larger than the page), so resuming after a page's last position loses
//     nothing.
//   - Reads and subscriptions of $all skip system events (types and streams
//     starting with "$"); the port never writes them.
//   - Metadata travels as JSON in the event's user metadata, OccurredAt in
//     UTC with nanoseconds; data is stored as JSON content when it is valid
//     JSON and as binary otherwise, byte for byte either way.
//   - Errors are translated once, by the client's ErrorCode (translate):
//     WrongExpectedVersion becomes *domain.WrongExpectedRevisionError (with
//     the stream's actual revision read back), ResourceNotFound and
//     StreamDeleted become domain.ErrStreamNotFound.
//
// # Differences from the embedded store
//
// EventStoreDB detects a retried append only at the same place in the same
// stream, and with Any only on a best-effort basis; an event ID reused in
// another stream is not refused. Positions are not gap-free. The user in the
// connection string must be allowed to read $all (an admin by default).
package esdb
