package graph

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

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
	d, err := r.Views.Delivery(ctx, id)
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

// canWatch checks that the caller may follow an address's history.
func (r *Resolver) canWatch(ctx context.Context, address string) error {
	a, err := r.Views.Address(ctx, address)
	if err != nil {
		return err
	}
	if a.Kind == domain.AddressInspector {
		return nil
	}
	_, err = r.ownedEndpoint(ctx, address)
	return err
}

// watchDeliveries streams rows of an address as they are created or updated,
// until the subscription ends.
func (r *Resolver) watchDeliveries(ctx context.Context, address string) <-chan *model.Delivery {
	changes, stop := r.Views.Watch(address)
	out := make(chan *model.Delivery)
	go func() {
		defer close(out)
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ch, ok := <-changes:
				if !ok {
					return
				}
				d, err := r.Views.Delivery(ctx, ch.DeliveryID)
				if err != nil {
					r.Logger.WarnContext(ctx, "deliveries subscription read", "delivery_id", ch.DeliveryID, "err", err)
					continue
				}
				select {
				case out <- toDelivery(d):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
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
	cmds, err := r.Hub.Attach(ctx, tunnel.SessionInfo{AgentID: agentID, EndpointID: ep.ID, AccountID: ep.AccountID, Target: ep.Target})
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

// events pages through the log in order.
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
	evs, err := r.Log.ReadAll(ctx, from, first+1)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	conn := &model.EventConnection{PageInfo: &model.PageInfo{HasNextPage: len(evs) > first}}
	if len(evs) > first {
		evs = evs[:first]
	}
	conn.Edges = make([]*model.EventEdge, 0, len(evs))
	conn.Nodes = make([]*model.Event, 0, len(evs))
	for _, e := range evs {
		n := toEvent(e)
		conn.Edges = append(conn.Edges, &model.EventEdge{Cursor: n.Position, Node: n})
		conn.Nodes = append(conn.Nodes, n)
	}
	if len(evs) > 0 {
		end := conn.Nodes[len(evs)-1].Position
		conn.PageInfo.EndCursor = &end
	}
	return conn, nil
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
	out := domain.ForwardOutcome{AttemptID: in.AttemptID, Headers: fromHeaderInputs(in.Headers), Error: deref(in.Error)}
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
		if *in.Status < 100 || *in.Status > 999 {
			return out, &domain.InvalidInputError{Field: "status", Reason: "must be an HTTP status code"}
		}
		out.Status = *in.Status // with error set too: the agent's own 504
	case out.Error == "":
		return out, &domain.InvalidInputError{Field: "status", Reason: "give a status or an error"}
	}
	return out, nil
}
