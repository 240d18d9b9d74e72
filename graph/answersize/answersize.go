// Package answersize bounds the bytes the API's answers hold: each answer
// (an HTTP response, or one message of a WebSocket operation) up to a
// per-answer limit, and the heap all answers being built or written at once
// take (HeapPerByte for each byte counted) up to a process-wide budget.
//
// A request's cost (graph/limits.go) bounds the work a query asks for, but
// not the bytes it produces: a stored body of control characters is six
// times larger once JSON escapes it, and aliases multiply it. So the bytes
// are counted as they are made — the payloads a resolver loads and the
// encoded length of every string field — and an answer that would pass a
// bound is refused before it is built any further.
package answersize

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dustin/go-humanize"

	"github.com/relayhq/relay/internal/clientkey"
)

// Sentinels of the two refusals; the API's error presenter gives them
// their extensions.code.
var (
	// ErrTooLarge: this answer alone would pass the per-answer limit.
	ErrTooLarge = errors.New("answer too large")
	// ErrBusy: the answers being built or written right now hold the whole
	// budget; the same request may pass a moment later.
	ErrBusy = errors.New("answers in progress hold the API's memory budget")
	// ErrEnded: the answer's operation has ended (Meter.Close); what is
	// still being read for it is not counted, nor sent.
	ErrEnded = errors.New("the operation of this answer has ended")
)

// HeapPerByte is the heap an answer takes, at its peak, for each byte its
// meter counts, and so what each counted byte takes of the process-wide
// budget: a budget of 256 MiB admits answers counted at 85 MiB at once.
// An answer's bytes are held several times over while it is built: the
// payloads read from the log, decoded; each body copied into a string and
// encoded to base64 for its fields; the answer marshalled into a buffer
// that grows by doubling; garbage of each step until the collector runs.
// A page of 16 stored bodies of 256 KiB with body and bodyBase64, counted
// at 13.4 MiB, took 30–34 MiB of heap at its peak (garbage included, at
// GOGC=100), 2.2–2.5 bytes a byte counted; asking for its bodies in base64
// alone, 9.3 MiB counted, took up to 25 MiB, 2.7 bytes a byte
// (graph.TestAnswersHeapStaysWithinTheBudget).
const HeapPerByte = 3

// Budget is the process-wide pool of answer heap and the per-answer limit.
//
// Answers hold their heap until they are written, and a client that reads
// slowly keeps its answer's for as long as each 32 KiB it takes comes
// within the body timeout. So one caller (an account, else a client
// address) may hold at most a share of the pool, and its client network
// (clientkey.Network) at most half: a caller past its share is refused,
// not everyone else. Those shares let a few callers fill it, so its last
// quarter is kept for callers that hold little: an answer that would take
// the pool past three quarters is admitted only while its caller and
// network each hold at most a sixteenth of it. The shares mirror the
// body budget's (ingress.BodyBudget).
type Budget struct {
	perAnswer int64
	total     int64
	// A caller's share and its network's, each at least one whole answer;
	// open is what may be held before the reserve, small the most a
	// caller or network may hold to take from it.
	perCaller, perNetwork, open, small int64

	mu        sync.Mutex
	inUse     int64
	byCaller  map[string]int64
	byNetwork map[string]int64
}

// CallerShare, NetworkShare, ReservedShare and SmallShare: one caller may
// hold 1/CallerShare of the budget (at least one answer at its limit), its
// network 1/NetworkShare; the last 1/ReservedShare is taken only by
// callers and networks that hold at most 1/SmallShare with it.
const (
	CallerShare   = 4
	NetworkShare  = 2
	ReservedShare = 4
	SmallShare    = 16
)

// The shares an answer may be refused by (BusyError.Share).
const (
	ShareRelay   = "relay"   // the whole budget is held
	ShareCaller  = "caller"  // the caller holds its share
	ShareNetwork = "network" // the caller's network holds its half
	ShareReserve = "reserve" // the last quarter, kept for those that hold little
)

// BusyError is an answer refused for the budget or a share of it. It
// matches ErrBusy.
type BusyError struct{ Share string }

func (e *BusyError) Error() string {
	switch e.Share {
	case ShareCaller:
		return ErrBusy.Error() + ": your answers still being written hold your share of it (a quarter); read them, or try again shortly"
	case ShareNetwork:
		return ErrBusy.Error() + ": answers to your client network (IPv4 /24, IPv6 /48) still being written hold its share of it (half); try again shortly"
	case ShareReserve:
		return ErrBusy.Error() + ": it is three quarters full, and its last quarter is kept for callers that hold at most a sixteenth of it; ask for fewer bodies, or try again shortly"
	default:
		return ErrBusy.Error() + "; try again shortly"
	}
}

// Is makes errors.Is(err, ErrBusy) hold.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// New returns a budget: perAnswer bytes for one answer (as encoded), total
// bytes of heap for all answers at once (HeapPerByte a byte counted).
func New(perAnswer, total int64) *Budget {
	one := perAnswer * HeapPerByte
	return &Budget{
		perAnswer: perAnswer, total: total,
		perCaller:  max(total/CallerShare, one),
		perNetwork: max(total/NetworkShare, one),
		open:       total - total/ReservedShare,
		small:      total / SmallShare,
		byCaller:   map[string]int64{}, byNetwork: map[string]int64{},
	}
}

// InUse is the heap answers hold now, HeapPerByte for each byte counted
// (for tests and metrics).
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// admit takes h bytes of heap for caller, or names the share that
// refuses them. Called with b.mu held.
func (b *Budget) admit(caller, network string, h int64) (full string) {
	reserved := b.inUse+h > b.open
	switch {
	case b.inUse+h > b.total:
		return ShareRelay
	case b.byCaller[caller]+h > b.perCaller:
		return ShareCaller
	case network != "" && b.byNetwork[network]+h > b.perNetwork:
		return ShareNetwork
	case reserved && (b.byCaller[caller]+h > b.small || network != "" && b.byNetwork[network]+h > b.small):
		return ShareReserve
	}
	b.move(caller, network, h)
	return ""
}

// move adds h (or gives back -h) bytes of heap to caller's and its
// network's counts and the whole. Called with b.mu held.
func (b *Budget) move(caller, network string, h int64) {
	b.inUse += h
	if b.byCaller[caller] += h; b.byCaller[caller] == 0 {
		delete(b.byCaller, caller)
	}
	if network != "" {
		if b.byNetwork[network] += h; b.byNetwork[network] == 0 {
			delete(b.byNetwork, network)
		}
	}
}

// Meter counts one answer's bytes against its budget. It is safe for
// concurrent use: gqlgen resolves fields in parallel.
type Meter struct {
	b    *Budget
	used atomic.Int64 // bytes counted, for the per-answer limit
	// Guarded by b.mu: who the answer counts against, and the heap it
	// holds of the budget under that name (at least HeapPerByte times
	// used: it is taken a chunk at a time).
	caller, network string
	held            int64
	closed          bool
	covered         atomic.Int64 // held, read without the lock
}

// chunk is the heap a meter takes from the budget at a time, so that most
// fields are counted without the budget's lock; a chunk the budget
// refuses is asked for again as just what the field needs.
const chunk = 16 << 10

// Meter starts counting a new answer, against no caller until SetCaller
// names one.
func (b *Budget) Meter() *Meter { return &Meter{b: b} }

// SetCaller names who the answer counts against (an account's key, else
// a client address); what it holds already moves to that name.
func (m *Meter) SetCaller(caller string) {
	if m == nil {
		return
	}
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.move(m.caller, m.network, -m.held)
	m.caller, m.network = caller, clientkey.Network(caller)
	b.move(m.caller, m.network, m.held)
}

// Charge counts n more bytes of the answer, HeapPerByte times n of the
// budget. It refuses (and counts nothing) when the answer would pass the
// per-answer limit, or the budget or the share of it its caller or the
// caller's network may hold (a *BusyError).
func (m *Meter) Charge(n int64) error {
	if m == nil || n <= 0 {
		return nil
	}
	if used := m.used.Add(n); used > m.b.perAnswer {
		m.used.Add(-n)
		return fmt.Errorf("%w: more than %s (ask for fewer rows, aliases or payload fields)",
			ErrTooLarge, humanize.IBytes(uint64(m.b.perAnswer)))
	}
	need := (m.used.Load()) * HeapPerByte
	if need <= m.covered.Load() {
		return nil
	}
	if err := m.cover(need); err != nil {
		m.used.Add(-n)
		return err
	}
	return nil
}

// Reserve takes from the budget now the heap of n bytes the answer is
// about to count (the fields it will encode, estimated before they are
// read), without counting them: the charges that follow are covered by
// it. An answer admitted a part at a time can otherwise fail half built:
// pages admitted at once for their stored bodies each found the heap for
// their fields taken by the others, and every one was refused after
// reading its bodies (24 pages of one caller, 64 MiB: 2–3 answered, at
// times none; graph.TestAnswersHeapStaysWithinTheBudget). It refuses
// (and takes nothing) as Charge would for n bytes.
func (m *Meter) Reserve(n int64) error {
	if m == nil || n <= 0 {
		return nil
	}
	used := m.used.Load()
	if used+n > m.b.perAnswer {
		return fmt.Errorf("%w: more than %s (ask for fewer rows, aliases or payload fields)",
			ErrTooLarge, humanize.IBytes(uint64(m.b.perAnswer)))
	}
	return m.cover((used + n) * HeapPerByte)
}

// cover takes from the budget what the answer needs beyond what it holds
// to hold need bytes of heap, a chunk at least when the budget allows.
func (m *Meter) cover(need int64) error {
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if m.closed {
		return ErrEnded
	}
	short := need - m.held
	if short <= 0 {
		return nil
	}
	full := b.admit(m.caller, m.network, max(short, chunk))
	if full == "" {
		m.held += max(short, chunk)
	} else if full = b.admit(m.caller, m.network, short); full == "" {
		m.held += short
	}
	if full != "" {
		return &BusyError{Share: full}
	}
	m.covered.Store(m.held)
	return nil
}

// Release gives the answer's bytes back to the budget once the answer is
// written (or dropped) and starts the meter afresh, for the next message
// of the same operation.
func (m *Meter) Release() { m.release(false) }

// Close gives the answer's bytes back for good once its operation has
// ended: a charge made after it (a subscription's resolver still reading
// its next item, which its operation no longer waits for) is refused with
// ErrEnded and counts nothing. Before, such a charge was held of the
// budget for the life of the process: a client that stopped subscriptions
// while their rows were being read left the budget a little fuller each
// time, until it refused every answer.
func (m *Meter) Close() { m.release(true) }

func (m *Meter) release(closing bool) {
	if m == nil {
		return
	}
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.move(m.caller, m.network, -m.held)
	m.held = 0
	m.closed = m.closed || closing
	m.covered.Store(0)
	m.used.Store(0)
}

type meterKey struct{}

// With returns ctx carrying m: what resolves in it is counted by m.
func With(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// SetCaller names the caller of the answer metered in ctx (see
// Meter.SetCaller); without a meter it does nothing.
func SetCaller(ctx context.Context, caller string) {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	m.SetCaller(caller)
}

// Charge counts n bytes against the meter in ctx; without one it counts
// nothing (the API always sets one; tests of single resolvers may not).
func Charge(ctx context.Context, n int64) error {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m.Charge(n)
}

// Reserve takes the heap of n bytes about to be counted by the meter in
// ctx (see Meter.Reserve); without one it does nothing.
func Reserve(ctx context.Context, n int64) error {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m.Reserve(n)
}

// EncodedLen is the length of s as a JSON string written by the API:
// quotes, two bytes for \" \\ \n \r \t, six for any other control
// character (\u00XX), one for everything else (the API does not escape <,
// > and &, which JSON does not require).
func EncodedLen(s string) int64 {
	n := int64(2 + len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}
