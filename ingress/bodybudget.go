package ingress

import (
	"errors"
	"io"
	"sync/atomic"
)

// DefaultProxyBodyBudget is the memory all proxied bodies in flight may
// hold at once when Config.ProxyBodyBudget is zero.
const DefaultProxyBodyBudget = 256 << 20

// ErrBodyBudget reports a proxied body refused because the bodies already
// in flight hold the whole budget.
var ErrBodyBudget = errors.New("proxied bodies in flight hold the relay's body budget")

// bodyBudget is the memory that proxied bodies, which are held whole until
// the local answer comes back, may take all together. Without it, every
// sender could hold --max-body, and a hundred of them a gigabyte.
type bodyBudget struct {
	total int64
	used  atomic.Int64
}

// reserve takes n bytes of the budget, or nothing and false when they are
// not there.
func (b *bodyBudget) reserve(n int64) bool {
	if b == nil {
		return true
	}
	if b.used.Add(n) > b.total {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) release(n int64) {
	if b != nil && n > 0 {
		b.used.Add(-n)
	}
}

// InUse is the bytes proxied bodies hold now (for tests and metrics).
func (b *bodyBudget) InUse() int64 { return b.used.Load() }

// readBudgeted reads r to its end (r is already limited to most bytes)
// into a buffer whose memory is first reserved from budget. A declared
// length (Content-Length) is reserved whole before anything is read, so
// that senders are admitted one by one: reserving as bytes arrive would
// let many large bodies each take a part of the budget and none finish.
// Without one (chunked), the buffer grows by doubling, each growth
// reserved first. It returns the bytes read, the bytes reserved (the
// caller releases them once done with the body) and ErrBodyBudget when
// the budget could not hold the body.
func readBudgeted(r io.Reader, budget *bodyBudget, most, declared int64) (buf []byte, reserved int64, err error) {
	const first = 32 << 10
	reserved = min(int64(first), most)
	if declared > 0 {
		// One byte more than declared: a body longer than its claim must
		// still be seen to be (most is maxBody+1 for the same reason).
		reserved = min(declared+1, most)
	}
	if !budget.reserve(reserved) {
		return nil, 0, ErrBodyBudget
	}
	buf = make([]byte, 0, min(int64(first), reserved))
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) >= most {
				return buf, reserved, nil // r is limited to most bytes
			}
			size := min(2*int64(cap(buf)), most)
			if size > reserved {
				if !budget.reserve(size - reserved) {
					return buf, reserved, ErrBodyBudget
				}
				reserved = size
			}
			next := make([]byte, len(buf), size)
			copy(next, buf)
			buf = next
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF {
			return buf, reserved, nil
		}
		if rerr != nil {
			return buf, reserved, rerr
		}
	}
}
