package projections

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// slowLog is a log whose every stream read waits latency first, as a log
// across a network does.
type slowLog struct {
	domain.EventStore
	latency time.Duration
}

func (s slowLog) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	time.Sleep(s.latency)
	return s.EventStore.ReadStream(ctx, stream, from, max)
}

// BenchmarkDeliveriesPageBodies measures a page of 20 deliveries read with
// their requests' headers and bodies (4 KiB or 64 KiB each) from the log, as the
// API reads one for a query that selects them: named to the views as a
// reader (readmodel.WithReader) and, under "budget", within an answer's
// log budget of 128 MiB (readmodel.LogBudget); "none" is the same read
// without a budget. "embedded" reads the embedded log; "1ms" a log whose
// every read waits 1 ms first.
func BenchmarkDeliveriesPageBodies(b *testing.B) {
	for _, size := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) { benchDeliveriesPageBodies(b, size) })
	}
}

func benchDeliveriesPageBodies(b *testing.B, size int) {
	s := newSynth(b, bytes.Repeat([]byte("x"), size))
	for range 20 {
		s.delivery("ep-0")
	}
	events := s.take()
	for _, log := range []struct {
		name    string
		latency time.Duration
	}{{"embedded", 0}, {"1ms", time.Millisecond}} {
		var store domain.EventStore = s.store
		if log.latency > 0 {
			store = slowLog{EventStore: s.store, latency: log.latency}
		}
		v, err := Open(b.Context(), filepath.Join(b.TempDir(), "views.db"), store, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = v.Close() })
		applyTB(b, v, events)
		for _, tc := range []struct {
			name   string
			budget bool
		}{{"budget", true}, {"none", false}} {
			b.Run(log.name+"/"+tc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					ctx := readmodel.WithReader(b.Context(), readmodel.ReaderKey("account:acct-1"))
					if tc.budget {
						ctx = readmodel.WithLogBudget(ctx, readmodel.NewLogBudget(128<<20))
					}
					p, err := v.Deliveries(ctx, "ep-0", 20, "")
					if err != nil || len(p.Items) != 20 || len(p.Items[0].Body) != size {
						b.Fatal(len(p.Items), err)
					}
				}
			})
		}
	}
}
