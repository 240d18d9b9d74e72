package engines

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// The workload is the SQLite log's BenchmarkAppend: each op appends one
// event of ~1 KiB (or two of ~1.5 KiB) to a new stream of its own, with the
// checks the log makes (the stream must not exist, the event id must be
// new), a gap-free position, and the write durable (fsync) before the
// append returns. As in the SQLite log, one writer goroutine takes every
// append waiting and commits them in one durable batch (group commit), so
// concurrent appenders share fsyncs.

// store is what an engine offers the writer: one durable commit of a
// group of appends, positions from next.
type store interface {
	commit(group []*request, next uint64) (uint64, error)
	close() error
}

type request struct {
	stream string
	ids    []string
	data   [][]byte
	done   chan error
}

var errExists = errors.New("stream exists")

// writer is the group-commit loop.
type writer struct {
	s    store
	in   chan *request
	next uint64
}

func (w *writer) run() {
	for r := range w.in {
		group := []*request{r}
	more:
		for len(group) < 512 {
			select {
			case r, ok := <-w.in:
				if !ok {
					break more
				}
				group = append(group, r)
			default:
				break more
			}
		}
		next, err := w.s.commit(group, w.next)
		if err == nil {
			w.next = next
		}
		for _, r := range group {
			r.done <- err
		}
	}
}

// Keys: e/<position> the event, s/<stream> the stream's last revision,
// i/<event id> the event's position.
func posKey(p uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte("e/"), p)
}

type pebbleStore struct{ db *pebble.DB }

func (p *pebbleStore) commit(group []*request, next uint64) (uint64, error) {
	b := p.db.NewBatch()
	defer b.Close()
	for _, r := range group {
		if _, c, err := p.db.Get([]byte("s/" + r.stream)); err == nil {
			c.Close()
			return next, errExists
		} else if !errors.Is(err, pebble.ErrNotFound) {
			return next, err
		}
		for i, id := range r.ids {
			if _, c, err := p.db.Get([]byte("i/" + id)); err == nil {
				c.Close()
				return next, errExists
			}
			next++
			if err := b.Set(posKey(next), r.data[i], nil); err != nil {
				return next, err
			}
			if err := b.Set([]byte("i/"+id), binary.BigEndian.AppendUint64(nil, next), nil); err != nil {
				return next, err
			}
		}
		if err := b.Set([]byte("s/"+r.stream), binary.BigEndian.AppendUint64(nil, uint64(len(r.ids)-1)), nil); err != nil {
			return next, err
		}
	}
	return next, b.Commit(pebble.Sync)
}

func (p *pebbleStore) close() error { return p.db.Close() }

type boltStore struct{ db *bolt.DB }

func (s *boltStore) commit(group []*request, next uint64) (uint64, error) {
	err := s.db.Update(func(tx *bolt.Tx) error {
		ev, st, ix := tx.Bucket([]byte("e")), tx.Bucket([]byte("s")), tx.Bucket([]byte("i"))
		for _, r := range group {
			if st.Get([]byte(r.stream)) != nil {
				return errExists
			}
			for i, id := range r.ids {
				if ix.Get([]byte(id)) != nil {
					return errExists
				}
				next++
				if err := ev.Put(binary.BigEndian.AppendUint64(nil, next), r.data[i]); err != nil {
					return err
				}
				if err := ix.Put([]byte(id), binary.BigEndian.AppendUint64(nil, next)); err != nil {
					return err
				}
			}
			if err := st.Put([]byte(r.stream), binary.BigEndian.AppendUint64(nil, uint64(len(r.ids)-1))); err != nil {
				return err
			}
		}
		return nil
	})
	return next, err
}

func (s *boltStore) close() error { return s.db.Close() }

func openEngine(b *testing.B, name string) store {
	b.Helper()
	dir := b.TempDir()
	switch name {
	case "pebble":
		db, err := pebble.Open(filepath.Join(dir, "log"), &pebble.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return &pebbleStore{db: db}
	case "bbolt":
		db, err := bolt.Open(filepath.Join(dir, "log.db"), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Update(func(tx *bolt.Tx) error {
			for _, n := range []string{"e", "s", "i"} {
				if _, err := tx.CreateBucketIfNotExists([]byte(n)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return &boltStore{db: db}
	}
	b.Fatalf("unknown engine %s", name)
	return nil
}

// BenchmarkAppend is eventstore/sqlite's BenchmarkAppend on other engines.
//
//	go test -run '^$' -bench Append -benchtime 3s -count 3 .
func BenchmarkAppend(b *testing.B) {
	for _, engine := range []string{"pebble", "bbolt"} {
		for _, shape := range []struct {
			name   string
			events int
			size   int
		}{{"1x1KiB", 1, 1000}, {"2x1.5KiB", 2, 1500}} {
			for _, appenders := range []int{1, 16, 64} {
				b.Run(fmt.Sprintf("%s/%s/appenders=%d", engine, shape.name, appenders), func(b *testing.B) {
					benchmarkAppend(b, engine, appenders, shape.events, shape.size)
				})
			}
		}
	}
}

func benchmarkAppend(b *testing.B, engine string, appenders, perAppend, size int) {
	s := openEngine(b, engine)
	defer s.close()
	w := &writer{s: s, in: make(chan *request, 1024)}
	go w.run()
	defer close(w.in)
	payload := []byte(`{"body":"` + string(bytes.Repeat([]byte("x"), size)) + `"}`)
	ids := make([][]string, b.N)
	for i := range ids {
		ids[i] = make([]string, perAppend)
		for j := range ids[i] {
			ids[i][j] = uuid.NewString()
		}
	}
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.SetBytes(int64(len(payload) * perAppend))
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan error, 1)
			data := make([][]byte, perAppend)
			for j := range data {
				data[j] = payload
			}
			for {
				n := int(next.Add(1)) - 1
				if n >= b.N {
					return
				}
				t0 := time.Now()
				w.in <- &request{stream: fmt.Sprintf("delivery-%d", n), ids: ids[n], data: data, done: done}
				if err := <-done; err != nil {
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
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/append")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	b.ReportMetric(float64(latencies[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[b.N*99/100].Microseconds())/1000, "p99-ms")
}

// cpuTime is the CPU this process has used (user and system): the
// benchmark's appenders and the engine together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
