package record_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/record"
)

// BenchmarkReconcilePrimary is what deciding an Endpoint's primary costs
// at a session's start or end (ReconcilePrimary reads the Endpoint's whole
// agent stream) when that stream holds the history of earlier sessions:
// each one connected, made primary, disconnected, left without a primary.
// A Recorder keeps each Endpoint's sessions folded, so only its first
// decision reads the whole stream.
// Figures in docs/benchmarks.md.
func BenchmarkReconcilePrimary(b *testing.B) {
	for _, sessions := range []int{100, 2_500, 25_000} {
		b.Run(fmt.Sprintf("events=%d", 4*sessions), func(b *testing.B) {
			store, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "events.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = store.Close() })
			rec := record.New(record.Config{Store: store})
			const ep = "ep"
			stream := domain.AgentStream(ep)
			// The history, a hundred events per append to fill it quickly.
			var batch []domain.Event
			for i := range sessions {
				id := fmt.Sprintf("conn-%d/%s", i, ep)
				batch = append(batch,
					domain.AgentConnected{EndpointID: ep, AgentID: id, Target: "127.0.0.1:3000", Node: "n1"},
					domain.PrimaryChanged{EndpointID: ep, AgentID: id, Reason: "first listener"},
					domain.AgentDisconnected{EndpointID: ep, AgentID: id, Reason: "agent disconnected"},
					domain.PrimaryChanged{EndpointID: ep, Previous: id, Reason: "no listener left"})
				if len(batch) >= 100 || i == sessions-1 {
					if _, err := rec.Record(b.Context(), stream, domain.Any(), domain.Trace{}, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			// Nothing is open and none is primary: each decision finds that
			// nothing changes, as a session's end often does.
			decide := func(rec *record.Recorder) {
				if _, changed, err := rec.ReconcilePrimary(b.Context(), ep); err != nil || changed {
					b.Fatal(changed, err)
				}
			}
			b.Run("first", func(b *testing.B) {
				// A process's first decision for the Endpoint reads the
				// whole stream.
				for b.Loop() {
					decide(record.New(record.Config{Store: store}))
				}
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
