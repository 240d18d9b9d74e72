// Package sqlite is the relay's embedded event store: the whole log in one
// SQLite file, through the pure-Go driver modernc.org/sqlite, so `relay
// serve` needs no database server and no cgo.
//
// # Layout
//
// One table, events, holds the log. position is the rowid and the global
// order; (stream, revision) is unique and indexed; id is unique and makes
// appends idempotent. Metadata is stored as JSON, OccurredAt in UTC with
// nanoseconds. Open takes the path of the database file (the caller picks
// it inside its data directory).
//
// # Why group commit
//
// An answered webhook must never be lost, so Append returns only once its
// events are on disk: WAL with synchronous=FULL, one fsync per commit. An
// fsync costs far more than the inserts it protects, so one transaction per
// append would cap the store at one append per fsync however many senders
// wait. Instead a single writer goroutine takes every append that is waiting
// when it becomes free (up to Options.MaxBatch), runs them all in one
// transaction, commits once and answers each caller. Under load, batches
// grow by themselves and the fsync is shared; an idle store still commits a
// lone append straight away. While many senders append at once (the last
// commit carried several appends), the writer also yields to the goroutines
// ready to run before it commits, for up to Options.Linger (500 µs), and
// takes what they append (internal/groupcommit): fewer, larger commits cost
// less CPU per append than the fsyncs and page rewrites of many small ones.
// It never waits on a clock for appends that nothing is working on.
//
// Each append in a batch is checked against the rows the batch has already
// written, so a conflicting or duplicate append fails on its own while the
// others commit; an append of several events sits under a savepoint so a
// failure halfway leaves nothing behind. Positions stay gap-free because
// refused appends insert nothing; only DeleteStream leaves gaps, where the
// deleted events were (see delete.go). The check is optimistic: the writer
// inserts straight away and lets the UNIQUE indexes on id and (stream,
// revision) catch the rare clash; only then does it undo the insert and
// look the IDs and the stream head up, to answer an idempotent retry, a
// duplicate ID or a wrong expected revision exactly as a check made first
// would.
// The optimistic insert takes the stream's head from memory (heads.go: the
// writer is the only writer, so it keeps the heads it committed); the
// careful path reads it from the log.
//
// Commits never checkpoint the WAL (wal_autocheckpoint=0 on the writer): a
// background checkpointer on its own connection copies it into the database
// file with PASSIVE checkpoints, which block neither the writer nor the
// readers. Once it has copied startOverFrames pages, the writer copies the
// few frames committed meanwhile between two batches, and its next commit
// writes the WAL from its beginning again, in place, rather than extending
// the file. No checkpoint waits for readers: a reader that keeps an old
// snapshot keeps the WAL from starting over and costs it disk space, never
// an append's wait; the WAL starts over once it lets go and is cut back to
// journal_size_limit.
//
// A single writer also makes subscriptions simple and exact. Positions are
// assigned in commit order, one per event, so they strictly increase (the
// port's rule) and once the writer announces a new last position, every
// event up to it is readable. A subscription keeps only its last position:
// it takes the events after it from the tail (tail.go: the most recently
// committed events, bounded by tailMaxEvents and tailMaxBytes, kept in memory
// so a live subscriber one commit behind does not read back what was just
// written) or, when they are older than the tail holds, from the database
// (catch-up and live are the same step), and when nothing is there waits
// for the writer's next announcement. The tail holds committed events only
// and is bounded, so none is skipped at the switch from stored to live
// events, none comes twice, and memory does not grow with the log.
//
// Reads use their own pool of query-only connections: WAL lets them run
// beside the writer without blocking it or being blocked.
//
// Benchmarks: go test -run x -bench Append -benchtime 3s ./eventstore/sqlite
// (BenchmarkAppend reports appends/s and p50/p99 latency for 1 and 64
// concurrent appenders).
package sqlite
