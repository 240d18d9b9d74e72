package jetstream

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/natstest"
)

// BenchmarkAppend measures appends acknowledged by an embedded server (R1,
// the server's default sync interval, so no fsync per append: not
// comparable with the embedded store's figures). Each op is one Append of
// two ~1.5 KiB events to its own stream delivery-<n> with NoStream, the
// shape of an inspector capture.
func BenchmarkAppend(b *testing.B) {
	for _, appenders := range []int{1, 64} {
		b.Run(fmt.Sprintf("appenders=%d", appenders), func(b *testing.B) { benchmarkAppend(b, appenders) })
	}
}

func benchmarkAppend(b *testing.B, appenders int) {
	const perAppend, size = 2, 1500
	s, err := Open(b.Context(), natstest.Start(b).URL(), freshOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := []byte(`{"body":"` + string(bytes.Repeat([]byte("x"), size)) + `"}`)
	meta := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now(), CorrelationID: uuid.NewString()}
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.SetBytes(int64(len(payload) * perAppend))
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
				evs := make([]domain.EventData, perAppend)
				for j := range evs {
					evs[j] = domain.EventData{ID: uuid.NewString(), Type: "delivery.received.v1", Data: payload, Metadata: meta}
				}
				t0 := time.Now()
				if _, err := s.Append(b.Context(), fmt.Sprintf("delivery-%d", n), domain.NoStream(), evs...); err != nil {
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

// BenchmarkEncode measures what the chain adds to building one append's
// message, without the server: the body alone (plain) against the body
// with its leaves and links in headers (chained), for the shape of
// BenchmarkAppend (two ~1.5 KiB events).
func BenchmarkEncode(b *testing.B) {
	payload := []byte(`{"body":"` + string(bytes.Repeat([]byte("x"), 1500)) + `"}`)
	meta := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now(), CorrelationID: uuid.NewString()}
	bt := batch{stream: "delivery-1", revision: 3, events: []domain.EventData{
		{ID: uuid.NewString(), Type: "delivery.received.v1", Data: payload, Metadata: meta},
		{ID: uuid.NewString(), Type: "delivery.forwarded.v1", Data: payload, Metadata: meta},
	}}
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeBatch(bt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chained", func(b *testing.B) {
		var prev evidence.Hash
		for b.Loop() {
			if _, err := chainMessage("relay.events.delivery-1", bt, prev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
