package sqlite

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// BenchmarkAppend measures durable appends: each op is one Append of one
// ~1 KiB event to its own stream delivery-<n>, as ingress does for every
// webhook. With 64 appenders the writer's batches grow and share fsyncs.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppend(b, appenders)
		})
	}
}

func benchmarkAppend(b *testing.B, appenders int) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "events.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := []byte(`{"body":"` + string(bytes.Repeat([]byte("x"), 1000)) + `"}`)
	meta := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now(), CorrelationID: uuid.NewString()}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup

	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	start := time.Now()
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= b.N {
					return
				}
				e := domain.EventData{ID: ids[n], Type: "delivery.received.v1", Data: payload, Metadata: meta}
				t0 := time.Now()
				if _, err := s.Append(b.Context(), fmt.Sprintf("delivery-%d", n), domain.NoStream(), e); err != nil {
					failed.Store(err)
					return
				}
				latencies[n] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(latencies[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[b.N*99/100].Microseconds())/1000, "p99-ms")
}
