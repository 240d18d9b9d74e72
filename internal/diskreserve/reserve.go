package diskreserve

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
)

// DefaultEvery is how often the free space is read at most: a statfs a
// second, however many requests ask.
const DefaultEvery = time.Second

// DefaultLimit is the reserve when the operator names none: room for
// retention's deletions and the appends never refused (agent sessions,
// decisions, quota changes) on any disk.
var DefaultLimit = Limit{Bytes: 1 << 30}

// Space is a file system's free and total bytes.
type Space struct{ Free, Total uint64 }

// Source tells how much room the data folder's file system has. A statfs
// cannot be cancelled, so it takes no context.
type Source interface {
	Space() (Space, error)
}

// Statfs is the real Source: statfs on a folder.
type Statfs struct{ Dir string }

// Limit is the reserve as the operator gives it: a size, or a percentage
// of the file system's size. The zero Limit is off.
type Limit struct {
	Bytes   uint64
	Percent float64
}

// ParseLimit reads "1GiB", "5%" or "off".
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return Limit{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f > 0 && f <= 50) {
			return Limit{}, fmt.Errorf("percentage %q must be above 0 and at most 50", s)
		}
		return Limit{Percent: f}, nil
	}
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 {
		return Limit{}, fmt.Errorf("not a size, a percentage or off (try 1GiB or 5%%): %q", s)
	}
	return Limit{Bytes: n}, nil
}

// String is the Limit as ParseLimit reads it.
func (l Limit) String() string {
	switch {
	case l.Percent > 0:
		return strconv.FormatFloat(l.Percent, 'f', -1, 64) + "%"
	case l.Bytes > 0:
		return humanize.IBytes(l.Bytes)
	}
	return "off"
}

// Off tells whether the Limit reserves nothing.
func (l Limit) Off() bool { return l.Bytes == 0 && l.Percent <= 0 }

// Of is the Limit in bytes on a file system of total bytes.
func (l Limit) Of(total uint64) uint64 {
	if l.Percent > 0 {
		return uint64(float64(total) * l.Percent / 100)
	}
	return l.Bytes
}

// Level is how close the disk is to full.
type Level int

const (
	// Clear: at least twice the reserve is free.
	Clear Level = iota
	// Low: less than twice the reserve is free; new and anonymous work
	// is refused.
	Low
	// Full: less than the reserve is free; every delivery is refused too.
	Full
)

func (l Level) String() string {
	return [...]string{"clear", "low", "full"}[l]
}

// State is the last reading: the Level, the free bytes and the reserve in
// bytes. Err is set when the free space could not be read (then Level is
// Clear: an unknown is never a reason to refuse).
type State struct {
	Level   Level
	Free    uint64
	Reserve uint64
	Err     error
}

// What the reserve refused, counted for the metrics.
const (
	RefusedDelivery = "delivery" // a delivery answered 507
	RefusedAPI      = "api"      // a sign-up, inspector, Endpoint, retry or redrive
	RefusedAnswer   = "answer"   // an attempt's answer recorded without its body
)

// refusalKinds are the kinds counted, in the order of Reserve.refusals.
var refusalKinds = [...]string{RefusedDelivery, RefusedAPI, RefusedAnswer}

// Config configures a Reserve.
type Config struct {
	Source Source
	Limit  Limit
	Every  time.Duration // default DefaultEvery
	Now    func() time.Time
	Logger *slog.Logger
	Dir    string // named in the log lines
}

// Reserve answers whether the disk has room. A nil *Reserve is a relay
// without one: always Clear. It is safe for concurrent use.
type Reserve struct {
	cfg   Config
	state atomic.Pointer[reading]
	// mu is held by the one caller reading the Source; the others take
	// the last reading meanwhile.
	mu       sync.Mutex
	warned   bool // the Source's error was logged
	refusals [len(refusalKinds)]atomic.Int64
}

type reading struct {
	State
	at time.Time
}

// New makes a Reserve and reads the Source once. A Limit that is Off
// gives nil: no reserve.
func New(cfg Config) *Reserve {
	if cfg.Limit.Off() || cfg.Source == nil {
		return nil
	}
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reserve{cfg: cfg}
	r.Check()
	return r
}

// State is the last reading, read again first when it is older than
// Every. Concurrent callers never wait for a read in progress.
func (r *Reserve) State() State {
	if r == nil {
		return State{}
	}
	last := r.state.Load()
	if r.cfg.Now().Sub(last.at) < r.cfg.Every || !r.mu.TryLock() {
		return last.State
	}
	defer r.mu.Unlock()
	return r.read().State
}

// Check reads the Source now and returns the new State.
func (r *Reserve) Check() State {
	if r == nil {
		return State{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.read().State
}

// read takes a reading and logs a change of Level; r.mu is held.
func (r *Reserve) read() *reading {
	now := r.cfg.Now()
	sp, err := r.cfg.Source.Space()
	next := &reading{at: now}
	if err != nil {
		next.Err = err
		if !r.warned {
			r.warned = true
			r.cfg.Logger.Warn("cannot read the free disk space: the disk reserve refuses nothing until it can", "dir", r.cfg.Dir, "error", err)
		}
	} else {
		reserve := r.cfg.Limit.Of(sp.Total)
		next.Free, next.Reserve = sp.Free, reserve
		next.Level = levelOf(sp.Free, reserve, r.state.Load())
	}
	prev := r.state.Swap(next)
	if prev == nil || prev.Level != next.Level {
		r.logLevel(next.State, prev == nil)
	}
	return next
}

// levelOf is the level free bytes give against reserve. A level is left
// for a better one only once free clears its threshold by a sixteenth of
// the reserve: a disk hovering at a threshold (writes and retention's
// deletions taking turns) would otherwise change level, and log it, at
// every read.
func levelOf(free, reserve uint64, prev *reading) Level {
	level := Clear
	switch {
	case free < reserve:
		level = Full
	case free < 2*reserve:
		level = Low
	}
	if prev == nil || prev.Err != nil || level >= prev.Level {
		return level
	}
	margin := reserve / 16
	switch {
	case prev.Level == Full && free < reserve+margin:
		return Full
	case free < 2*reserve+margin:
		return Low
	}
	return level
}

// logLevel tells a change of level, with the figures in bytes and as a
// person reads them: on a small disk the default reserve (1 GiB) refuses
// sign-ups from the start, and this line is where the operator learns why
// and what to change.
func (r *Reserve) logLevel(s State, first bool) {
	attrs := []any{"dir", r.cfg.Dir, "free", humanize.IBytes(s.Free), "reserve", humanize.IBytes(s.Reserve),
		"free_bytes", s.Free, "reserve_bytes", s.Reserve}
	switch s.Level {
	case Full:
		r.cfg.Logger.Error("free disk below the reserve (--min-free-disk): refusing every delivery (507), retry, sign-up, new inspector and Endpoint "+
			"until retention or the operator frees space; a smaller --min-free-disk (a size, a percentage such as 5%, or off) leaves the relay more of this disk", attrs...)
	case Low:
		r.cfg.Logger.Warn("free disk below twice the reserve (--min-free-disk): refusing sign-ups, new inspectors and Endpoints (INSUFFICIENT_STORAGE) and guest inspectors' deliveries (507) "+
			"until twice the reserve is free; free space, or set a smaller --min-free-disk (a size, a percentage such as 5%, or off)", attrs...)
	default:
		if !first {
			r.cfg.Logger.Info("free disk above twice the reserve again: accepting all work", attrs...)
		}
	}
}

// Refused counts one refusal of what (RefusedDelivery, RefusedAPI,
// RefusedAnswer).
func (r *Reserve) Refused(what string) {
	if r == nil {
		return
	}
	for i, k := range refusalKinds {
		if k == what {
			r.refusals[i].Add(1)
		}
	}
}

// Refusals are the refusals counted since the start, by what.
func (r *Reserve) Refusals() map[string]int64 {
	out := make(map[string]int64, len(refusalKinds))
	for i, k := range refusalKinds {
		if r != nil {
			out[k] = r.refusals[i].Load()
		} else {
			out[k] = 0
		}
	}
	return out
}

// Kinds are the kinds of refusal counted, for the metrics' labels.
func Kinds() []string { return refusalKinds[:] }
