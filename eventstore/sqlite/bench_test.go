package sqlite

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// BenchmarkAppend measures durable appends: each op is one Append to its own
// stream delivery-<n> with NoStream, as ingress does for every webhook. The
// "1x1KiB" shape is one ~1 KiB event; "2x1.5KiB" is two ~1.5 KiB events, the
// shape of an inspector capture. With 16 or 64 appenders the writer's
// batches grow and share fsyncs.
func BenchmarkAppend(b *testing.B) {
	shapes := []struct {
		name   string
		events int
		size   int
	}{
		{"1x1KiB", 1, 1000},
		{"2x1.5KiB", 2, 1500},
	}
	for _, shape := range shapes {
		for _, appenders := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/appenders=%d", shape.name, appenders), func(b *testing.B) {
				benchmarkAppend(b, appenders, shape.events, shape.size, false)
			})
		}
	}
}

// BenchmarkAppendNext measures appends with an expected revision, as a
// delivery's outcome follows its request: each op appends one ~1 KiB event
// to its own stream delivery-<n> with NoStream, then, once that returned,
// another with Exact(0), for which the writer needs the stream's head.
func BenchmarkAppendNext(b *testing.B) {
	for _, appenders := range []int{1, 16} {
		b.Run(fmt.Sprintf("1x1KiB/appenders=%d", appenders), func(b *testing.B) {
			benchmarkAppend(b, appenders, 1, 1000, true)
		})
	}
}

func benchmarkAppend(b *testing.B, appenders, perAppend, size int, next bool) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "events.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := []byte(`{"body":"` + string(bytes.Repeat([]byte("x"), size)) + `"}`)
	meta := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now(), CorrelationID: uuid.NewString()}
	ids := make([][]string, b.N)
	for i := range ids {
		ids[i] = make([]string, perAppend)
		for j := range ids[i] {
			ids[i][j] = uuid.NewString()
		}
	}
	latencies := make([]time.Duration, b.N)
	var counter atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup

	b.SetBytes(int64(len(payload) * perAppend))
	b.ResetTimer()
	cpu0, written0 := cpuTime(), writtenBytes(b)
	start := time.Now()
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs := make([]domain.EventData, perAppend)
			for {
				n := int(counter.Add(1)) - 1
				if n >= b.N {
					return
				}
				for j := range evs {
					evs[j] = domain.EventData{ID: ids[n][j], Type: "delivery.received.v1", Data: payload, Metadata: meta}
				}
				t0 := time.Now()
				stream := fmt.Sprintf("delivery-%d", n)
				if _, err := s.Append(b.Context(), stream, domain.NoStream(), evs...); err != nil {
					failed.Store(err)
					return
				}
				if next {
					for j := range evs {
						evs[j] = domain.EventData{ID: uuid.NewString(), Type: "delivery.outcome.v1", Data: payload, Metadata: meta}
					}
					if _, err := s.Append(b.Context(), stream, domain.Exact(uint64(perAppend-1)), evs...); err != nil {
						failed.Store(err)
						return
					}
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
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/append")
	b.ReportMetric(float64(writtenBytes(b)-written0)/1024/float64(b.N), "disk-KiB/append")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(latencies[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[b.N*99/100].Microseconds())/1000, "p99-ms")
}

// writtenBytes is what this process has had written to storage so far
// (write_bytes of /proc/self/io): the WAL's frames and the checkpoints'
// copies. It includes the checkpoint of the WAL that Close runs only when
// that has happened before the timer stops, so it is a floor.
func writtenBytes(b *testing.B) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("/proc/self/io has no write_bytes")
	return 0
}

// cpuTime is the CPU this process has used (user and system): the
// benchmark's appenders and the engine together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFillLog writes a log of many deliveries for measuring verification
// (docs/benchmarks.md): RELAY_FILL_LOG=DIR RELAY_FILL_EVENTS=1000000. Each
// delivery is one ~1 KiB delivery.received.v1 event, appended by 64
// appenders as ingress does.
func TestFillLog(t *testing.T) {
	dir := os.Getenv("RELAY_FILL_LOG")
	if dir == "" {
		t.Skip("RELAY_FILL_LOG is not set: set it to a folder to fill with a log for measuring (RELAY_FILL_EVENTS events, default 1 000 000)")
	}
	total := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("RELAY_FILL_EVENTS")); err == nil && n > 0 {
		total = n
	}
	s, err := Open(t.Context(), filepath.Join(dir, "events.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 700))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(total) {
					return
				}
				data := []byte(`{"address":"ins-1","address_kind":"inspector","request":{"method":"POST","path":"/hook","headers":[{"name":"Content-Type","value":"application/json"}],"body":"` + body + `"},"received_at":"2026-11-25T00:00:00Z"}`)
				meta := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now(), CorrelationID: uuid.NewString()}
				ev := domain.EventData{ID: uuid.NewString(), Type: "delivery.received.v1", Data: data, Metadata: meta}
				if _, err := s.Append(t.Context(), fmt.Sprintf("delivery-%d", n), domain.NoStream(), ev); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
