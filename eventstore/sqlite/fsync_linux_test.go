package sqlite

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkFsync is the disk's own floor under a durable commit: each op
// writes 8 KiB into a file of 1 MiB (in place, as a restarted WAL is
// written) or past its end (as a growing WAL is) and syncs it, one at a
// time, back to back or (paced) after a pause of 1 ms, as one sender's
// commits come. A commit of the log waits for one of these;
// BenchmarkAppend with one appender shows what the log adds to it.
// cpu-µs/op is the process's CPU time per op: the system call's own work,
// which a relay pays for each commit.
//
//	go test -run '^$' -bench Fsync -benchtime 2000x ./eventstore/sqlite
func BenchmarkFsync(b *testing.B) {
	fdatasync := func(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
	for _, bc := range []struct {
		name   string
		append bool
		paced  bool
		sync   func(*os.File) error
	}{
		{"overwrite/fsync", false, false, (*os.File).Sync},
		{"overwrite/fdatasync", false, false, fdatasync},
		{"append/fsync", true, false, (*os.File).Sync},
		{"append/fdatasync", true, false, fdatasync},
		{"overwrite/fsync/paced", false, true, (*os.File).Sync},
		{"append/fsync/paced", true, true, (*os.File).Sync},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "sync.dat"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			const size, page = 1 << 20, 8 << 10
			if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			buf := bytes.Repeat([]byte("x"), page)
			latencies := make([]time.Duration, 0, b.N)
			cpuBefore := cpuTime()
			i := 0
			for b.Loop() {
				if bc.paced {
					b.StopTimer()
					time.Sleep(time.Millisecond)
					b.StartTimer()
				}
				off := int64(i%(size/page)) * page
				if bc.append {
					off = size + int64(i)*page
				}
				i++
				start := time.Now()
				if _, err := f.WriteAt(buf, off); err != nil {
					b.Fatal(err)
				}
				if err := bc.sync(f); err != nil {
					b.Fatal(err)
				}
				latencies = append(latencies, time.Since(start))
			}
			b.ReportMetric(float64((cpuTime()-cpuBefore).Microseconds())/float64(i), "cpu-µs/op")
			slices.Sort(latencies)
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(latencies[len(latencies)*9/10].Microseconds()), "p90-µs")
		})
	}
}
