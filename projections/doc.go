// Package projections keeps the relay's read models, each a type of its own
// with its own reader methods: [History] (deliveries with attempts and
// responses, payload reads, live watches), [Addresses] (inspectors and their
// idle expiry, Endpoints, agent presence, the ingress address cache) and
// [Accounts] (accounts, tokens, the account events index). One [Runner]
// feeds them all.
//
// The views are fed only by the event store's subscription (the store is the
// single source of truth) and live in tables of their own SQLite file, so Go
// memory stays flat however long the history grows. They keep no copy of a
// request's or a response's headers and body: a delivery's row refers to
// the DeliveryReceived and the latest ForwardResponded in the log, which
// [History.Delivery] and [History.Deliveries] read back (one stream read per
// delivery), never cached. Applying a delivery therefore decodes only the
// fields its row needs and writes no body.
//
// Each read model also has a writing half (historyWriter, addressesWriter,
// accountsWriter, one interface, modelWriter): it decides which events it
// applies and writes its own tables. One writer goroutine ([Runner.Run])
// gives each batch of events to every writer in one SQLite transaction that
// also stores the checkpoint (the last applied position), so a crash never
// leaves a view ahead of or behind its checkpoint. Events at or below the checkpoint are skipped, which makes
// re-delivery harmless. Readers use separate connections (WAL), see a
// consistent snapshot per call, and can wait for their own writes with
// [Runner.WaitFor]. [Runner.Rebuild] drops every view and replays the log from
// position 0; the result is identical row for row to the live view.
//
// A batch that fails (a full disk) does not stop [Runner.Run]: it logs the
// first failure, reports it through [Runner.Health] and subscribes again
// from the checkpoint with a growing pause until the cause clears. The
// views are disposable: [Open] replaces a file that fails PRAGMA
// quick_check, and [Runner.Reconcile] rebuilds views whose checkpoint names
// an event the log does not hold at that position (a log restored from an
// older backup).
//
// Views are deterministic functions of the log: every column comes from an
// event's payload, its occurred-at time or its position, never from the wall
// clock or from how the log was split into batches.
package projections
