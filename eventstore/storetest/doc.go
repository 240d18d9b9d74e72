// Package storetest is the conformance suite every domain.EventStore adapter
// runs, so the embedded SQLite log and EventStoreDB are interchangeable behind
// the port.
//
// An adapter's test calls Run with a Factory:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Factory{
//			Open:   func(t *testing.T) domain.EventStore { return openTemp(t, dir) },
//			Reopen: func(t *testing.T, s domain.EventStore) domain.EventStore { s.Close(); return open(t, dir) },
//			Guarantees: storetest.Guarantees{EmptyOnOpen: true, GapFreePositions: true, ...},
//		})
//	}
//
// Open gives each subtest its own store; the suite closes it when the subtest
// ends, so Close must be safe to call twice. Reopen closes a store and opens
// the same data again, as a process restart would; the restart test is
// skipped when it is nil.
//
// Every adapter must pass the port's contract: appends with NoStream,
// StreamExists, Exact and Any, conflicts reported as
// *domain.WrongExpectedRevisionError, idempotent retries, ReadStream and
// ReadAll, positions strictly increasing in ReadAll order, SubscribeAll
// catch-up then live with no gap and no duplicate at the seam, cancellation
// and Close of subscriptions, concurrent appenders, and lossless metadata
// and binary data. Guarantees turns on the checks for what only some
// adapters promise (a private empty log, gap-free positions, log-wide unique
// event IDs, positions in stream reads). The suite names its streams with
// fresh UUIDs and filters what it reads to them, so it also runs against a
// shared EventStoreDB that already holds other events.
package storetest
