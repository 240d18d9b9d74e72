package graph

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/readmodel"
)

// ownedEndpoint returns an Endpoint of the signed-in account; another
// account's Endpoint is ErrNotFound, exactly like an unknown id.
func (r *Resolver) ownedEndpoint(ctx context.Context, id string) (readmodel.Endpoint, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	ep, err := r.Views.Endpoint(ctx, id)
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	if ep.AccountID != acc.ID {
		return readmodel.Endpoint{}, domain.ErrNotFound
	}
	return ep, nil
}

// visibleDelivery returns a delivery the caller may read: any inspector's
// (the unguessable address is the secret) or one of the account's Endpoints'.
func (r *Resolver) visibleDelivery(ctx context.Context, id string) (readmodel.Delivery, error) {
	d, err := r.deliveryReader(ctx)(ctx, id)
	if err != nil {
		return readmodel.Delivery{}, err
	}
	if d.Kind == domain.AddressInspector {
		return d, nil
	}
	acc, err := r.account(ctx)
	if errors.Is(err, domain.ErrUnauthenticated) || (err == nil && acc.ID != d.AccountID) {
		return readmodel.Delivery{}, domain.ErrNotFound
	}
	return d, err
}

// canWatch checks that the caller may follow an address's history: any
// inspector's, or an Endpoint of the signed-in account that is not deleted
// (another account's reads as not found, as in ownedEndpoint). The Address
// row already carries the owner, so no second read is needed.
func (r *Resolver) canWatch(ctx context.Context, address string) error {
	a, err := r.Views.Address(ctx, address)
	if err != nil {
		return err
	}
	if a.Kind == domain.AddressInspector {
		return nil
	}
	acc, err := r.account(ctx)
	if err != nil {
		return err
	}
	if a.Deleted || a.AccountID != acc.ID {
		return domain.ErrNotFound
	}
	return nil
}

// deliveryReader is how the field being resolved reads one delivery: with
// what only the log holds when the query selects it (see wantsPayload).
func (r *Resolver) deliveryReader(ctx context.Context) func(context.Context, string) (readmodel.Delivery, error) {
	if wantsPayload(ctx) {
		return r.Views.Delivery
	}
	return r.Views.DeliverySummary
}

// history reads a page of an address's history, with what only the log
// holds when the query selects it (see wantsPayload).
func (r *Resolver) history(ctx context.Context, address string, first int, after string) (readmodel.Page, error) {
	if wantsPayload(ctx) {
		return r.Views.Deliveries(ctx, address, first, after)
	}
	return r.Views.DeliverySummaries(ctx, address, first, after)
}

// watchDeliveries streams rows of an address as they are created or updated,
// until the subscription ends. With since, it first sends the rows changed
// after that cursor: the watch is registered before they are read, so a
// change lands in the replay, in the live stream or in both, never in
// neither.
func (r *Resolver) watchDeliveries(ctx context.Context, address string, since *string) (<-chan *model.Delivery, error) {
	read := r.deliveryReader(ctx)
	changes, stop := r.Views.Watch(address)
	var replay []string
	if since != nil {
		ids, err := r.Views.ChangedSince(ctx, address, *since)
		if err != nil {
			stop()
			return nil, err
		}
		replay = ids
	}
	out := make(chan *model.Delivery)
	go func() {
		defer close(out)
		defer stop()
		for _, id := range replay {
			if !r.sendDelivery(ctx, out, read, id) {
				return
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case ch, ok := <-changes:
				if !ok {
					return
				}
				if !r.sendDelivery(ctx, out, read, ch.DeliveryID) {
					return
				}
			}
		}
	}()
	return out, nil
}

// sendDelivery reads a delivery and sends it on out; it returns false when
// the subscription ended. A delivery that cannot be read is logged and
// skipped: the next change of it sends it again.
//
// It loads a row only when the socket has room for it and only one row per
// socket at a time until that row is queued (wsgql.AwaitRoom): rows to a
// client that stops reading hold one row, not one per subscription.
func (r *Resolver) sendDelivery(ctx context.Context, out chan<- *model.Delivery, read func(context.Context, string) (readmodel.Delivery, error), id string) bool {
	turn, err := wsgql.AwaitRoom(ctx)
	if err != nil {
		return false
	}
	d, err := read(ctx, id)
	if err != nil {
		turn.Release()
		if ctx.Err() != nil {
			return false
		}
		r.Logger.WarnContext(ctx, "deliveries subscription read", "delivery_id", id, "err", err)
		return true
	}
	// The turn passes once the row's message is queued, not when it leaves
	// here: gqlgen still encodes it, and a row per subscription waiting
	// for room would be held otherwise.
	turn.HandOn()
	select {
	case out <- toDelivery(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// events pages through the log in order. The operator (admin token) reads
// all of it; an account reads only the events of its own streams, so the
// log never shows one tenant's deliveries to another. Either way a page
// costs what it holds: the operator's is a read of the log from the cursor,
// an account's a read of the views' index of its events and then of those
// events, never a scan of other accounts' events.
func (r *Resolver) events(ctx context.Context, after string, first int) (*model.EventConnection, error) {
	var from uint64
	if after != "" {
		p, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return nil, &domain.InvalidInputError{Field: "after", Reason: "must be an event position"}
		}
		from = p
	}
	switch {
	case first < 0:
		return nil, &domain.InvalidInputError{Field: "first", Reason: "must not be negative"}
	case first == 0:
		first = DefaultPageSize
	case first > MaxPageSize:
		first = MaxPageSize
	}
	var (
		evs []domain.RecordedEvent
		err error
	)
	// Each read asks for one event more than the page holds, so the page
	// learns whether the log goes on without a read of its own.
	if r.isAdmin(ctx) {
		evs, err = r.Log.ReadAll(ctx, from, first+1)
	} else {
		evs, err = r.accountEvents(ctx, from, first+1)
	}
	if err != nil {
		return nil, err
	}
	conn := &model.EventConnection{PageInfo: &model.PageInfo{}, Edges: []*model.EventEdge{}, Nodes: []*model.Event{}}
	if len(evs) > first {
		evs, conn.PageInfo.HasNextPage = evs[:first], true
	}
	for _, e := range evs {
		n := toEvent(e)
		conn.Edges = append(conn.Edges, &model.EventEdge{Cursor: n.Position, Node: n})
		conn.Nodes = append(conn.Nodes, n)
	}
	if len(evs) > 0 {
		end := strconv.FormatUint(evs[len(evs)-1].Position, 10)
		conn.PageInfo.EndCursor = &end
	}
	return conn, nil
}

// accountEvents reads up to limit events after from of the signed-in
// account's streams: their places from the views' index, the events from
// the log, one read per run of consecutive revisions of a stream.
func (r *Resolver) accountEvents(ctx context.Context, from uint64, limit int) ([]domain.RecordedEvent, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	refs, err := r.Views.AccountEvents(ctx, acc.ID, from, limit)
	if err != nil {
		return nil, err
	}
	byPlace := map[readmodel.EventRef]domain.RecordedEvent{}
	runs := map[string][]uint64{} // stream -> revisions wanted, ascending
	for _, ref := range refs {
		runs[ref.Stream] = append(runs[ref.Stream], ref.Revision)
	}
	for stream, revs := range runs {
		for i := 0; i < len(revs); {
			j := i + 1
			for j < len(revs) && revs[j] == revs[j-1]+1 {
				j++
			}
			read, err := r.Log.ReadStream(ctx, stream, revs[i], j-i)
			if err != nil {
				return nil, fmt.Errorf("read events of %s: %w", stream, err)
			}
			for _, e := range read {
				byPlace[readmodel.EventRef{Position: e.Position, Stream: e.Stream, Revision: e.Revision}] = e
			}
			i = j
		}
	}
	out := make([]domain.RecordedEvent, 0, len(refs))
	for _, ref := range refs {
		e, ok := byPlace[ref]
		if !ok {
			// The index and the log disagree: the views describe another
			// log (checked at start, see the projections' Reconcile).
			return nil, fmt.Errorf("read events: %s@%d at position %d is not in the log", ref.Stream, ref.Revision, ref.Position)
		}
		out = append(out, e)
	}
	return out, nil
}

// isAdmin reports whether the request carries the operator's admin token
// (never true when the relay runs without one).
func (r *Resolver) isAdmin(ctx context.Context) bool {
	tok, _ := ctx.Value(tokenKey).(string)
	return r.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(r.AdminToken)) == 1
}

func toPatch(in model.UpdateEndpointInput) commands.EndpointPatch {
	p := commands.EndpointPatch{Name: in.Name, Target: in.Target, ResponseCapture: in.ResponseCapture}
	if in.Mode != nil {
		m := domain.EndpointMode(*in.Mode)
		p.Mode = &m
	}
	return p
}
