package record_test

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/record"
)

// BenchmarkReconcilePrimary is what deciding an Endpoint's primary costs
// at a session's start or end when its agent stream holds the history of
// earlier sessions: each one connected, made primary, disconnected, left
// without a primary, with a decision after every 25 sessions as a relay
// makes one after every start and end (appendSessions).
// Figures in docs/benchmarks.md.
func BenchmarkReconcilePrimary(b *testing.B) {
	for _, sessions := range []int{100, 2_500, 25_000} {
		b.Run(fmt.Sprintf("events=%d", 4*sessions), func(b *testing.B) {
			store, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "events.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = store.Close() })
			counting := &countingStore{EventStore: store}
			rec := record.New(record.Config{Store: counting})
			const ep = "ep"
			appendSessions(b, rec, ep, 0, sessions)
			// Nothing is open and none is primary: each decision finds that
			// nothing changes, as a session's end often does.
			decide := func(rec *record.Recorder) {
				if _, changed, err := rec.ReconcilePrimary(b.Context(), ep); err != nil || changed {
					b.Fatal(changed, err)
				}
			}
			b.Run("first", func(b *testing.B) {
				// A process's first decision for the Endpoint, with nothing
				// of it folded yet: its CPU (the process's, the store's
				// included) and the events it reads.
				counting.events.Store(0)
				cpu := cpuTime()
				for b.Loop() {
					decide(record.New(record.Config{Store: counting}))
				}
				b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(counting.events.Load())/float64(b.N), "events-read/op")
			})
			b.Run("next", func(b *testing.B) {
				// Later ones read only what was appended since.
				decide(rec)
				for b.Loop() {
					decide(rec)
				}
			})
		})
	}
}

// cpuTime is the CPU this process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
