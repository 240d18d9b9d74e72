package readmodel

import (
	"context"
	"errors"
	"sync/atomic"
)

// LogBudget bounds the bytes of the log that the reads of stored requests
// and answers made for one API answer (an HTTP response, or one message of
// a subscription) read: each attempt's response read by its position, and
// a delivery's request with its latest answer. Each such read is run through Read, which runs
// it only while the bytes read under the budget are below its limit and
// charges it what it read. One read's bounds (projections) hold per read;
// without a budget an operation of many aliases made one read each, each
// up to its own bounds.
//
// The reads under one budget run one at a time, so it is passed by at most
// the one read that crossed it: gqlgen resolves fields at once, and reads
// that each checked the budget before any had charged it would all pass.
type LogBudget struct {
	limit int64
	turn  chan struct{} // held by the read running
	read  atomic.Int64
}

// NewLogBudget is a budget of limit bytes of the log.
func NewLogBudget(limit int64) *LogBudget {
	return &LogBudget{limit: limit, turn: make(chan struct{}, 1)}
}

// Read runs read, a read of stored answers from the log that returns the
// bytes of the events it read, and charges them to the budget; ok is false
// (and read not run) once the bytes read reach the limit. On a nil budget
// read runs unbounded: the relay's own reads name none.
func (b *LogBudget) Read(ctx context.Context, read func() (int64, error)) (ok bool, err error) {
	if b == nil {
		_, err := read()
		return true, err
	}
	select {
	case b.turn <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-b.turn }()
	if b.read.Load() >= b.limit {
		return false, nil
	}
	n, err := read()
	b.read.Add(n)
	return true, err
}

// Limit is the budget's limit in bytes of the log; Spent what its reads
// have read so far.
func (b *LogBudget) Limit() int64 { return b.limit }
func (b *LogBudget) Spent() int64 { return b.read.Load() }

// NotReadLogBudget is AttemptResponse.NotRead of a response not read
// because the answer's LogBudget was spent.
const NotReadLogBudget = "not read: the stored requests and responses read for this answer already read its budget of the log"

// ErrLogBudget refuses a read of a delivery's request and latest answer
// once the answer's LogBudget is spent.
var ErrLogBudget = errors.New(NotReadLogBudget + "; ask for fewer deliveries' headers, bodies or responses in one query")

type logBudgetKey struct{}

// WithLogBudget returns ctx whose reads of stored answers are charged to b.
func WithLogBudget(ctx context.Context, b *LogBudget) context.Context {
	return context.WithValue(ctx, logBudgetKey{}, b)
}

// LogBudgetOf is the budget WithLogBudget set, nil for none.
func LogBudgetOf(ctx context.Context) *LogBudget {
	b, _ := ctx.Value(logBudgetKey{}).(*LogBudget)
	return b
}
