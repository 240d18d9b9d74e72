package cmdutil

import (
	"runtime"
	"runtime/debug"
)

// GCPercent is the GC target of the relay's long-running commands (relay
// serve, relay agent, relay listen): their live heap is small (bodies live
// in SQLite or pass through), so collecting at 5× instead of 2× of it costs
// a few MiB and saves the CPU of most collections on every request
// (docs/benchmarks.md).
const GCPercent = 400

// SetGC gives the process GCPercent unless GOGC is set, and the soft memory
// limit limit unless GOMEMLIMIT is set or limit is 0 (off): with the high
// target, the limit makes the GC collect sooner when a burst of large
// bodies or answers would let garbage grow past it. It also stops the
// runtime's sampling of allocations: nothing in these commands reads the
// heap profile (relay serve --memprofile turns it back on), and sampling
// took 0.7 µs of a proxied request's CPU (docs/benchmarks.md).
func SetGC(env func(string) string, limit int64) {
	runtime.MemProfileRate = 0
	if env("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
	if env("GOMEMLIMIT") == "" && limit > 0 {
		debug.SetMemoryLimit(limit)
	}
}
