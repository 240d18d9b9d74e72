package graph

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/tunnel"
)

// ownedEndpoint returns an Endpoint of the signed-in account; another
// account's Endpoint is ErrNotFound, exactly like an unknown id.
func (r *Resolver) ownedEndpoint(ctx context.Context, id string) (projections.Endpoint, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return projections.Endpoint{}, err
	}
	ep, err := r.Views.Endpoint(ctx, id)
	if err != nil {
		return projections.Endpoint{}, err
	}
	if ep.AccountID != acc.ID {
		return projections.Endpoint{}, domain.ErrNotFound
	}
	return ep, nil
}

// visibleDelivery returns a delivery the caller may read: any inspector's
// (the unguessable address is the secret) or one of the account's Endpoints'.
func (r *Resolver) visibleDelivery(ctx context.Context, id string) (projections.Delivery, error) {
	d, err := r.deliveryReader(ctx)(ctx, id)
	if err != nil {
		return projections.Delivery{}, err
	}
	if d.Kind == domain.AddressInspector {
		return d, nil
	}
	acc, err := r.account(ctx)
	if errors.Is(err, domain.ErrUnauthenticated) || (err == nil && acc.ID != d.AccountID) {
		return projections.Delivery{}, domain.ErrNotFound
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
func (r *Resolver) deliveryReader(ctx context.Context) func(context.Context, string) (projections.Delivery, error) {
	if wantsPayload(ctx) {
		return r.Views.Delivery
	}
	return r.Views.DeliverySummary
}

// history reads a page of an address's history, with what only the log
// holds when the query selects it (see wantsPayload).
func (r *Resolver) history(ctx context.Context, address string, first int, after string) (projections.Page, error) {
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
func (r *Resolver) sendDelivery(ctx context.Context, out chan<- *model.Delivery, read func(context.Context, string) (projections.Delivery, error), id string) bool {
	d, err := read(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		r.Logger.WarnContext(ctx, "deliveries subscription read", "delivery_id", id, "err", err)
		return true
	}
	select {
	case out <- toDelivery(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// attachAgent registers the connection as an agent session of an Endpoint
// and streams its forward requests.
func (r *Resolver) attachAgent(ctx context.Context, endpointID string) (<-chan *model.ForwardRequest, error) {
	ep, err := r.ownedEndpoint(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	agentID := connectionID(ctx)
	if agentID == "" {
		agentID = commands.NewEventID()
	}
	// The agent's own target is where it forwards; an agent that did not
	// name one is taken to use the Endpoint's.
	target := agentTarget(ctx)
	if target == "" {
		target = ep.Target
	}
	cmds, err := r.Hub.Attach(ctx, tunnel.SessionInfo{AgentID: agentID, EndpointID: ep.ID, AccountID: ep.AccountID, Target: target})
	if err != nil {
		return nil, err
	}
	out := make(chan *model.ForwardRequest)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case c, ok := <-cmds:
				if !ok {
					return
				}
				select {
				case out <- toForwardRequest(c):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// events pages through the log in order. The operator (admin token) reads
// all of it; an account reads only the events of its own streams, so the
// log never shows one tenant's deliveries to another.
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
		first = 100
	case first > 1000:
		first = 1000
	}
	visible, err := r.eventFilter(ctx)
	if err != nil {
		return nil, err
	}
	conn := &model.EventConnection{PageInfo: &model.PageInfo{}, Edges: []*model.EventEdge{}, Nodes: []*model.Event{}}
	// Scan at most scanLimit events per call so a filtered page stays cheap;
	// endCursor says where the next call resumes. The first read asks for
	// one event more than the page holds, so an unfiltered page learns
	// whether the log goes on without a read of its own.
	const batch, scanLimit = 500, 10000
	scanned, cursor, size := 0, from, min(batch, first+1)
	more, known := false, false
scan:
	for scanned < scanLimit {
		evs, err := r.Log.ReadAll(ctx, cursor, size)
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		for _, e := range evs {
			if len(conn.Nodes) == first {
				more, known = true, true
				break scan
			}
			scanned++
			cursor = e.Position
			ok, err := visible(ctx, e.Stream)
			if err != nil {
				return nil, err
			}
			if ok {
				n := toEvent(e)
				conn.Edges = append(conn.Edges, &model.EventEdge{Cursor: n.Position, Node: n})
				conn.Nodes = append(conn.Nodes, n)
			}
		}
		if len(evs) < size {
			known = true // the end of the log
			break
		}
		size = batch
	}
	if !known { // stopped at scanLimit with the log going on or not
		next, err := r.Log.ReadAll(ctx, cursor, 1)
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		more = len(next) > 0
	}
	conn.PageInfo.HasNextPage = more
	if cursor > from {
		end := strconv.FormatUint(cursor, 10)
		conn.PageInfo.EndCursor = &end
	}
	return conn, nil
}

// eventFilter returns which streams the caller may read.
func (r *Resolver) eventFilter(ctx context.Context) (func(context.Context, string) (bool, error), error) {
	if r.isAdmin(ctx) {
		return func(context.Context, string) (bool, error) { return true, nil }, nil
	}
	acc, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	cache := map[string]bool{}
	return func(ctx context.Context, stream string) (bool, error) {
		if v, ok := cache[stream]; ok {
			return v, nil
		}
		v, err := r.ownsStream(ctx, acc.ID, stream)
		if err != nil {
			return false, err
		}
		cache[stream] = v
		return v, nil
	}, nil
}

// isAdmin reports whether the request carries the operator's admin token
// (never true when the relay runs without one).
func (r *Resolver) isAdmin(ctx context.Context) bool {
	tok, _ := ctx.Value(tokenKey).(string)
	return r.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(r.AdminToken)) == 1
}

// ownsStream tells whether a stream belongs to the account.
func (r *Resolver) ownsStream(ctx context.Context, accountID, stream string) (bool, error) {
	kind, id, _ := strings.Cut(stream, "-")
	var owner string
	switch kind {
	case "account":
		return id == accountID, nil
	case "endpoint", "agent":
		// Address, not Endpoint: a deleted Endpoint's history stays its
		// owner's, and the hot prepared lookup skips the agent count.
		a, err := r.Views.Address(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		owner = a.AccountID // "" for an inspector
	case "delivery":
		acc, err := r.Views.DeliveryAccount(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		owner = acc
	default:
		return false, nil
	}
	return owner != "" && owner == accountID, nil
}

func toPatch(in model.UpdateEndpointInput) commands.EndpointPatch {
	p := commands.EndpointPatch{Name: in.Name, Target: in.Target, ResponseCapture: in.ResponseCapture}
	if in.Mode != nil {
		m := domain.EndpointMode(*in.Mode)
		p.Mode = &m
	}
	return p
}

// toOutcome reads the agent's report of one forward.
func toOutcome(in model.CompleteForwardInput) (domain.ForwardOutcome, error) {
	headers, err := fromHeaderInputs(in.Headers)
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	out := domain.ForwardOutcome{AttemptID: in.AttemptID, Headers: headers, Error: deref(in.Error), Failure: deref(in.Failure)}
	if in.DurationMs != nil {
		out.DurationMs = int64(*in.DurationMs)
	}
	if in.BodyBase64 != nil {
		b, err := base64.StdEncoding.DecodeString(*in.BodyBase64)
		if err != nil {
			return out, &domain.InvalidInputError{Field: "bodyBase64", Reason: "not valid base64"}
		}
		out.Body = b
	}
	switch {
	case in.Status != nil:
		// Which statuses a sender can get is the tunnel's rule (an
		// invalid one is recorded as a 502), not the API's.
		out.Status = *in.Status // with error set too: the agent's own 504
	case out.Error == "":
		return out, &domain.InvalidInputError{Field: "status", Reason: "give a status or an error"}
	}
	return out, nil
}
