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
	ia, err := sideIndex(row.Attempts, "a", a)
	if err != nil {
		return nil, err
	}
	ib, err := sideIndex(row.Attempts, "b", b)
	if err != nil {
		return nil, err
	}
	// Reading the two sides (the answers from the log, the edited bodies)
	// and decoding and walking two bodies of up to compare.MaxStructured
	// take up to tens of milliseconds of a core and some tens of MiB at
	// their peak: comparisons, reads included, run at most half the cores
	// at once, as searches do, so a flood of them leaves ingress and
	// ordinary reads the other half. Before, each alias of a comparison read
	// and decoded every answer of the delivery outside the gate: nine of
	// them over 25 captured answers of 8 MB took the relay to 3.1 GiB.
	release, err := r.compares.acquire(ctx, r.callerKey(ctx))
	if err != nil {
		return nil, err
	}
	defer release()
	var wanted []string
	for _, i := range []int{ia, ib} {
		if i >= 0 {
			wanted = append(wanted, row.Attempts[i].ID)
		}
	}
	var got map[string]readmodel.AttemptResponse
	if len(wanted) > 0 {
		if got, err = r.Views.AttemptResponses(ctx, row.ID, compare.MaxStructured, wanted...); err != nil {
			return nil, fmt.Errorf("compare: read responses: %w", err)
		}
		// A side whose response was not read (the answer's log budget
		// spent) is not compared as if it had none.
		for _, id := range wanted {
			if why := got[id].NotRead; why != "" {
				return nil, fmt.Errorf("%w: compare: attempt %s's response %s; compare in a query of its own", answersize.ErrTooLarge, id, why)
			}
		}
	}
	side := func(i int) (compare.Side, error) {
		if i < 0 {
			return compare.Side{Request: recorded}, nil
		}
		at := row.Attempts[i]
		edit := at.Edit
		if edit != nil && at.EditBodySize != nil {
			body, ok, err := r.Views.AttemptEditBody(ctx, row.ID, at.ID)
			if err != nil {
				return compare.Side{}, fmt.Errorf("compare: read the edited body: %w", err)
			}
			if ok {
				withBody := *edit
				withBody.Body = &body
				edit = &withBody
			}
		}
		s := compare.Side{Request: recorded.Edited(edit)}
		if resp, ok := got[at.ID]; ok {
			s.Response = &compare.Response{Status: resp.Status, Headers: resp.Headers, Body: resp.Body, Captured: resp.Captured,
				NotCaptured: resp.NotCaptured, Size: resp.BodySize, Encoded: resp.Encoded}
		}
		return s, nil
	}
	sa, err := side(ia)
	if err != nil {
		return nil, err
	}
	sb, err := side(ib)
	if err != nil {
		return nil, err
	}
	res := compare.Sides(sa, sb)
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

// sideIndex is the attempt a side of a comparison names: -1 for the
// recorded request ("original" or "0"), else its index, or invalid input
// naming field.
func sideIndex(attempts []readmodel.Attempt, field, ref string) (int, error) {
	if ref == "original" || ref == "0" {
		return -1, nil
	}
	i := attemptIndex(attempts, ref)
	if i < 0 {
		return 0, &domain.InvalidInputError{Field: field,
			Reason: fmt.Sprintf("attempt %q: want original, a number from 1 to %d or an attempt's id", ref, len(attempts))}
	}
	return i, nil
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
