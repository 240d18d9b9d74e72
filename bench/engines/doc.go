// Package engines measures embedded storage engines that keep the relay a
// static, cgo-free binary, on the log's append workload, beside the SQLite
// log's own BenchmarkAppend (eventstore/sqlite). It is a module of its own so
// that the relay does not depend on engines it does not use; see
// docs/event-store.md and docs/benchmarks.md for the figures and the
// decision.
package engines
