package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
)

// A new attempt of a delivery (a retry, a queued attempt) needs its request
// (the stream's first event) and its state: which attempts are out, how many
// there were, whether the queue settled it. The state is folded from the
// events that follow the request, and those are mostly attempts' outcomes,
// whose captured response bodies it does not need. So the request is read
// on its own, the rest is decoded without the responses' headers and bodies
// (leanEvent), a few events at a time, and the state folded so far is kept
// per delivery (foldedStates): the next attempt of the same delivery
// reads only what was appended since. A retry then costs the same whatever
// the delivery's history, and holds at most one page of it at a time.

// deliveryPage is how many events after the request one read asks for:
// each may hold a captured response (its body as long as the agent sent
// it), so few at a time.
const deliveryPage = 16

// maxDeliveryStates bounds the deliveries whose folded state a Recorder
// keeps; an entry is a few hundred bytes.
const maxDeliveryStates = 10_000

// loadDelivery reads a delivery's request and folds its state for a new
// attempt. A missing or deleted stream is domain.ErrNotFound.
func (r *Recorder) loadDelivery(ctx context.Context, deliveryID string) (domain.DeliveryReceived, *domain.Delivery, error) {
	_, received, st, err := r.foldDelivery(ctx, deliveryID)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return domain.DeliveryReceived{}, nil, domain.ErrNotFound
	}
	if err != nil {
		return domain.DeliveryReceived{}, nil, err
	}
	return received, st.d, nil
}

// loadAttempt folds a delivery's state and returns the ID of the event
// that requested attemptID (the outcome's causation; "" once the attempt
// has an outcome).
func (r *Recorder) loadAttempt(ctx context.Context, deliveryID, attemptID string) (*domain.Delivery, string, error) {
	_, _, st, err := r.foldDelivery(ctx, deliveryID)
	if err != nil {
		return nil, "", err
	}
	return st.d, st.requests[attemptID], nil
}

// foldDelivery reads a delivery's request (its first event) and its state
// folded up to the stream's end, which the caller may change.
func (r *Recorder) foldDelivery(ctx context.Context, deliveryID string) (domain.RecordedEvent, domain.DeliveryReceived, deliveryState, error) {
	stream := domain.DeliveryStream(deliveryID)
	fail := func(err error) (domain.RecordedEvent, domain.DeliveryReceived, deliveryState, error) {
		r.deliveries.drop(deliveryID)
		return domain.RecordedEvent{}, domain.DeliveryReceived{}, deliveryState{}, fmt.Errorf("load %s: %w", stream, err)
	}
	// The request is read every time, with the events after it when no
	// state is kept (one read for a delivery with few attempts): a stream
	// deleted since the state was kept answers here (its tombstone is at
	// revision 0).
	st, _ := r.deliveries.get(deliveryID)
	n := 1
	if st.d == nil {
		n = deliveryPage
	}
	batch, err := r.store.ReadStream(ctx, stream, 0, n)
	if err != nil {
		return fail(err)
	}
	if len(batch) == 0 {
		return fail(domain.ErrStreamNotFound)
	}
	first := batch[0]
	e, err := r.codec.Decode(first.Type, first.Data)
	if err != nil {
		return fail(fmt.Errorf("revision 0: %w", err))
	}
	received, ok := e.(domain.DeliveryReceived)
	if !ok {
		return fail(errors.New("the stream does not start with its request"))
	}
	if st.d == nil {
		st = deliveryState{d: domain.LoadDelivery(nil)}
		batch[0].Payload = received
	} else {
		batch, n = nil, 0
	}
	for {
		for _, rec := range batch {
			if rec.Revision != st.next {
				return fail(fmt.Errorf("revision %d where %d was expected", rec.Revision, st.next))
			}
			ev := rec.Payload
			if ev == nil {
				if ev, err = r.leanEvent(rec); err != nil {
					return fail(fmt.Errorf("revision %d: %w", rec.Revision, err))
				}
			}
			st.fold(rec.ID, ev)
		}
		if len(batch) < n {
			break
		}
		n = deliveryPage
		if batch, err = r.store.ReadStream(ctx, stream, st.next, n); err != nil {
			return fail(err)
		}
	}
	r.deliveries.put(deliveryID, st)
	st.d = st.d.Clone()
	return first, received, st, nil
}

// leanEvent decodes a delivery event for its state: an attempt's answer
// without its headers and body (encoding/json skips them without
// decoding the base64 text or allocating), any other event whole.
func (r *Recorder) leanEvent(rec domain.RecordedEvent) (domain.Event, error) {
	if rec.Type != domain.TypeForwardResponded {
		return r.codec.Decode(rec.Type, rec.Data)
	}
	var v struct {
		DeliveryID string `json:"delivery_id"`
		AttemptID  string `json:"attempt_id"`
		Copy       bool   `json:"copy"`
	}
	if err := json.Unmarshal(rec.Data, &v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", rec.Type, err)
	}
	return domain.ForwardResponded{DeliveryID: v.DeliveryID, AttemptID: v.AttemptID, Copy: v.Copy}, nil
}

// deliveryState is a delivery folded up to revision next-1 (nothing when
// d is nil).
type deliveryState struct {
	d    *domain.Delivery
	next uint64
	// requests names, for each attempt without an outcome, the event that
	// requested it: as many as the delivery has attempts out.
	requests map[string]string
}

// fold applies the event id at revision next.
func (st *deliveryState) fold(id string, e domain.Event) {
	st.d.Fold([]domain.Event{e})
	st.next++
	for _, x := range domain.Expand(e) {
		switch x := x.(type) {
		case domain.ForwardRequested:
			if st.requests == nil {
				st.requests = map[string]string{}
			}
			st.requests[x.AttemptID] = id
		case domain.ForwardResponded:
			delete(st.requests, x.AttemptID)
		case domain.ForwardFailed:
			delete(st.requests, x.AttemptID)
		}
	}
}

func (st deliveryState) nextRevision() uint64 { return st.next }

// clone copies st to fold on or keep.
func (st deliveryState) clone() deliveryState {
	c := deliveryState{d: st.d.Clone(), next: st.next}
	if len(st.requests) > 0 {
		c.requests = make(map[string]string, len(st.requests))
		for k, v := range st.requests {
			c.requests[k] = v
		}
	}
	return c
}
