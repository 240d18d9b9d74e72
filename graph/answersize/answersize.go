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
	"sync/atomic"

	"github.com/dustin/go-humanize"
)

// Sentinels of the two refusals; the API's error presenter gives them
// their extensions.code.
var (
	// ErrTooLarge: this answer alone would pass the per-answer limit.
	ErrTooLarge = errors.New("answer too large")
	// ErrBusy: the answers being built or written right now hold the whole
	// budget; the same request may pass a moment later.
	ErrBusy = errors.New("answers in progress hold the API's memory budget")
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
type Budget struct {
	perAnswer int64
	total     int64
	inUse     atomic.Int64
}

// New returns a budget: perAnswer bytes for one answer (as encoded), total
// bytes of heap for all answers at once (HeapPerByte a byte counted).
func New(perAnswer, total int64) *Budget {
	return &Budget{perAnswer: perAnswer, total: total}
}

// InUse is the heap answers hold now, HeapPerByte for each byte counted
// (for tests and metrics).
func (b *Budget) InUse() int64 { return b.inUse.Load() }

// Meter counts one answer's bytes against its budget. It is safe for
// concurrent use: gqlgen resolves fields in parallel.
type Meter struct {
	b    *Budget
	used atomic.Int64
}

// Meter starts counting a new answer.
func (b *Budget) Meter() *Meter { return &Meter{b: b} }

// Charge counts n more bytes of the answer, HeapPerByte times n of the
// budget. It refuses (and counts nothing) when the answer would pass the
// per-answer limit or the process would pass its budget.
func (m *Meter) Charge(n int64) error {
	if m == nil || n <= 0 {
		return nil
	}
	if used := m.used.Add(n); used > m.b.perAnswer {
		m.used.Add(-n)
		return fmt.Errorf("%w: more than %s (ask for fewer rows, aliases or payload fields)",
			ErrTooLarge, humanize.IBytes(uint64(m.b.perAnswer)))
	}
	if all := m.b.inUse.Add(n * HeapPerByte); all > m.b.total {
		m.b.inUse.Add(-n * HeapPerByte)
		m.used.Add(-n)
		return fmt.Errorf("%w (%s); try again shortly", ErrBusy, humanize.IBytes(uint64(m.b.total)))
	}
	return nil
}

// Release gives the answer's bytes back to the budget once the answer is
// written (or dropped) and starts the meter afresh, for the next message
// of the same operation.
func (m *Meter) Release() {
	if m == nil {
		return
	}
	m.b.inUse.Add(-m.used.Swap(0) * HeapPerByte)
}

type meterKey struct{}

// With returns ctx carrying m: what resolves in it is counted by m.
func With(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// Charge counts n bytes against the meter in ctx; without one it counts
// nothing (the API always sets one; tests of single resolvers may not).
func Charge(ctx context.Context, n int64) error {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m.Charge(n)
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
