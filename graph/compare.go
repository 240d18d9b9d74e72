package graph

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/relayhq/relay/compare"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/readmodel"
)

// compareAttempts is Delivery.compare: the two sides named by a and b,
// compared by package compare.
func (r *Resolver) compareAttempts(ctx context.Context, d *model.Delivery, a, b string) (*model.AttemptComparison, error) {
	row := d.Row
	recorded := compare.Request{Method: row.Method, Target: row.Target, Headers: row.Headers, Body: row.Body}
	var got map[string]readmodel.AttemptResponse
	if len(row.Attempts) > 0 {
		var err error
		if got, err = r.Views.AttemptResponses(ctx, row.ID); err != nil {
			return nil, fmt.Errorf("compare: read responses: %w", err)
		}
	}
	side := func(field, ref string) (compare.Side, error) {
		if ref == "original" || ref == "0" {
			return compare.Side{Request: recorded}, nil
		}
		i := attemptIndex(row.Attempts, ref)
		if i < 0 {
			return compare.Side{}, &domain.InvalidInputError{Field: field,
				Reason: fmt.Sprintf("attempt %q: want original, a number from 1 to %d or an attempt's id", ref, len(row.Attempts))}
		}
		at := row.Attempts[i]
		s := compare.Side{Request: recorded.Edited(at.Edit)}
		if resp, ok := got[at.ID]; ok {
			s.Response = &compare.Response{Status: resp.Status, Headers: resp.Headers, Body: resp.Body, Captured: resp.Captured, NotCaptured: resp.NotCaptured}
		}
		return s, nil
	}
	sa, err := side("a", a)
	if err != nil {
		return nil, err
	}
	sb, err := side("b", b)
	if err != nil {
		return nil, err
	}
	// Decoding and walking two bodies of up to compare.MaxStructured
	// takes up to tens of milliseconds of a core and ~25 MiB at its
	// peak: comparisons run at most half the cores at once, as searches do,
	// so a flood of them leaves ingress and ordinary reads the other half.
	release, err := r.compares.acquire(ctx, r.callerKey(ctx))
	if err != nil {
		return nil, err
	}
	res := compare.Sides(sa, sb)
	release()
	out := &model.AttemptComparison{Request: toChanges(res.Request), Response: toChanges(res.Response),
		ResponseCompared: res.ResponseCompared, Note: optional(res.Note)}
	// The changes quote the bodies: the answer's budget counts them.
	var n int64
	for _, cs := range [][]compare.Change{res.Request, res.Response} {
		for _, c := range cs {
			n += int64(len(c.Where))
			if c.A != nil {
				n += int64(len(*c.A))
			}
			if c.B != nil {
				n += int64(len(*c.B))
			}
		}
	}
	return out, answersize.Charge(ctx, n)
}

// compareGate holds a slot per comparison running: at most
// DefaultGlobalSearches (half the cores) at once. One caller (an account,
// else a client address) holds or waits for at most one slot less than
// there are (one, on two cores): its other comparisons wait for one of its
// own to end, not in the slots' queue, so another caller's comparison
// waits behind at most one of each caller's, never behind a flood of one.
type compareGate struct {
	once   sync.Once
	slots  chan struct{}
	shares clientkey.Shares
}

func (g *compareGate) acquire(ctx context.Context, caller string) (release func(), err error) {
	g.once.Do(func() { g.slots = make(chan struct{}, DefaultGlobalSearches()) })
	leave, err := g.shares.Take(ctx, caller, max(cap(g.slots)-1, 1))
	if err != nil {
		return nil, err
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// attemptIndex is the index of the attempt ref names (its number from 1,
// or its id), -1 for none.
func attemptIndex(attempts []readmodel.Attempt, ref string) int {
	if i, err := strconv.Atoi(ref); err == nil {
		if i >= 1 && i <= len(attempts) {
			return i - 1
		}
		return -1
	}
	for i, at := range attempts {
		if at.ID == ref {
			return i
		}
	}
	return -1
}

func toChanges(cs []compare.Change) []*model.Change {
	out := make([]*model.Change, 0, len(cs))
	for _, c := range cs {
		out = append(out, &model.Change{Where: c.Where, Before: c.A, After: c.B})
	}
	return out
}
