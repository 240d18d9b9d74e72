package diskreserve

import (
	"bytes"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeSpace is a Source whose free bytes the test sets, counting reads.
type fakeSpace struct {
	free, total atomic.Uint64
	reads       atomic.Int64
	err         error
}

func (f *fakeSpace) Space() (Space, error) {
	f.reads.Add(1)
	return Space{Free: f.free.Load(), Total: f.total.Load()}, f.err
}

func newFake(free, total uint64) *fakeSpace {
	f := &fakeSpace{}
	f.free.Store(free)
	f.total.Store(total)
	return f
}

func TestReserveLevels(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name  string
		limit Limit
		free  uint64
		want  Level
	}{
		{"plenty", Limit{Bytes: gib}, 10 * gib, Clear},
		{"exactly twice", Limit{Bytes: gib}, 2 * gib, Clear},
		{"below twice", Limit{Bytes: gib}, 2*gib - 1, Low},
		{"exactly the reserve", Limit{Bytes: gib}, gib, Low},
		{"below the reserve", Limit{Bytes: gib}, gib - 1, Full},
		{"nothing free", Limit{Bytes: gib}, 0, Full},
		{"5% of 100 GiB, 9 GiB free", Limit{Percent: 5}, 9 * gib, Low},
		{"5% of 100 GiB, 4 GiB free", Limit{Percent: 5}, 4 * gib, Full},
		{"5% of 100 GiB, 11 GiB free", Limit{Percent: 5}, 11 * gib, Clear},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{Source: newFake(tt.free, 100*gib), Limit: tt.limit})
			if s := r.State(); s.Level != tt.want || s.Free != tt.free {
				t.Errorf("state %+v, want level %s with %d free", s, tt.want, tt.free)
			}
		})
	}
}

// TestReserveReadsTheDiskAtMostOncePerInterval: however many requests ask,
// the Source is read once per Every; Check reads at once.
func TestReserveReadsTheDiskAtMostOncePerInterval(t *testing.T) {
	src := newFake(10<<30, 100<<30)
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := New(Config{Source: src, Limit: Limit{Bytes: 1 << 30}, Every: time.Second, Now: clock})
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("New read the disk %d times, want 1", n)
	}
	src.free.Store(0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if r.State().Level != Clear {
					t.Error("the reading changed before its interval passed")
					return
				}
			}
		})
	}
	wg.Wait()
	if n := src.reads.Load(); n != 1 {
		t.Fatalf("8000 requests within one interval read the disk %d times, want 1", n)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	for range 1000 {
		if r.State().Level != Full {
			t.Fatal("the reading did not change once its interval passed")
		}
	}
	if n := src.reads.Load(); n != 2 {
		t.Fatalf("1000 requests after one interval: %d reads in all, want 2", n)
	}
	src.free.Store(10 << 30)
	if s := r.Check(); s.Level != Clear || src.reads.Load() != 3 {
		t.Fatalf("Check: %+v after %d reads, want clear after 3", s, src.reads.Load())
	}
}

// TestReserveRefusesNothingItCannotRead: a Source that fails leaves the
// level clear (an unknown is no reason to refuse) and says why.
func TestReserveRefusesNothingItCannotRead(t *testing.T) {
	src := newFake(0, 0)
	src.err = errors.New("no statfs here")
	s := New(Config{Source: src, Limit: Limit{Bytes: 1 << 30}}).State()
	if s.Level != Clear || s.Err == nil {
		t.Fatalf("state %+v, want clear with the error", s)
	}
	var none *Reserve
	if s := none.State(); s.Level != Clear {
		t.Fatalf("no reserve: %+v, want clear", s)
	}
	if New(Config{Source: src}) != nil {
		t.Fatal("a Limit that is off made a reserve")
	}
}

// TestStatfsReadsTheDataFolder reads the real file system of a folder: a
// reserve larger than any disk is full there, and a missing folder is an
// error, not a level.
func TestStatfsReadsTheDataFolder(t *testing.T) {
	dir := t.TempDir()
	sp, err := Statfs{Dir: dir}.Space()
	if err != nil {
		t.Fatal(err)
	}
	if sp.Total == 0 || sp.Free == 0 || sp.Free > sp.Total {
		t.Fatalf("statfs %s: %+v, want 0 < free <= total", dir, sp)
	}
	s := New(Config{Source: Statfs{Dir: dir}, Limit: Limit{Bytes: 1 << 62}}).State()
	if s.Level != Full || s.Err != nil || s.Free == 0 {
		t.Fatalf("a 4 EiB reserve on %s: %+v, want full with the free bytes read", dir, s)
	}
	if _, err := (Statfs{Dir: filepath.Join(dir, "missing")}).Space(); err == nil {
		t.Fatal("statfs of a missing folder: no error")
	}
}

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want Limit
		bad  bool
	}{
		{in: "1GiB", want: Limit{Bytes: 1 << 30}},
		{in: "500MB", want: Limit{Bytes: 500_000_000}},
		{in: "5%", want: Limit{Percent: 5}},
		{in: "0.5%", want: Limit{Percent: 0.5}},
		{in: "off", want: Limit{}},
		{in: "0", bad: true},
		{in: "0%", bad: true},
		{in: "51%", bad: true},
		{in: "NaN%", bad: true},
		{in: "lots", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseLimit(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
	for _, l := range []Limit{{Bytes: 1 << 30}, {Percent: 0.5}, {}} {
		if again, _ := ParseLimit(l.String()); again != l {
			t.Errorf("%+v printed as %q reads back as %+v", l, l.String(), again)
		}
	}
}

// TestReserveLogsEachChangeOfLevel: the operator gets one line per change
// (warn when new work is refused, error when deliveries are, info when
// the room is back), not one per reading.
func TestReserveLogsEachChangeOfLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	src := newFake(10<<30, 100<<30)
	r := New(Config{Source: src, Limit: Limit{Bytes: 1 << 30}, Logger: log, Dir: "/data"})
	for _, free := range []uint64{10 << 30, 1536 << 20, 1536 << 20, 512 << 20, 512 << 20, 10 << 30} {
		src.free.Store(free)
		r.Check()
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"level=WARN msg=\"free disk below twice the reserve",
		"level=ERROR msg=\"free disk below the reserve",
		"level=INFO msg=\"free disk above twice the reserve again",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], "dir=/data") || !strings.Contains(lines[i], "reserve_bytes=1073741824") {
			t.Errorf("line %d: %s\nwant %s with the folder and the reserve", i, lines[i], w)
		}
	}
}

// TestReserveLeavesALevelPastAMargin: free space hovering at a threshold
// changes the level once, not at every read; it is left for a better one
// only a sixteenth of the reserve past its threshold.
func TestReserveLeavesALevelPastAMargin(t *testing.T) {
	const gib = 1 << 30
	var buf bytes.Buffer
	src := newFake(10*gib, 100*gib)
	r := New(Config{Source: src, Limit: Limit{Bytes: gib}, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	steps := []struct {
		free uint64
		want Level
	}{
		{2*gib - 1, Low},
		{2*gib + 1, Low}, // back above twice the reserve, within the margin
		{2*gib - 1, Low},
		{2*gib + gib/16, Clear},
		{gib - 1, Full},
		{gib + 1, Full},
		{gib + gib/16 - 1, Full},
		{gib + gib/16, Low},
		{gib - 1, Full}, // worse at once
	}
	for i, s := range steps {
		src.free.Store(s.free)
		if got := r.Check().Level; got != s.want {
			t.Errorf("step %d, %d free: level %s, want %s", i, s.free, got, s.want)
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != 5 {
		t.Errorf("%d log lines, want 5 (one per change):\n%s", n, buf.String())
	}
}
