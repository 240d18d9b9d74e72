package graph

import (
	"context"
	"encoding/base64"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/tunnel"
)

// The agent's half of the API: the forwardRequests subscription attaches a
// session and streams its work; completeForward reports an attempt's
// outcome. Both only adapt between GraphQL and tunnel.Sessions.

// attachAgent registers a subscription as an agent session of an Endpoint
// and streams its forward requests. One connection may serve several
// Endpoints, one subscription (and session) each.
func (r *Resolver) attachAgent(ctx context.Context, endpointID, target string) (<-chan *model.ForwardRequest, error) {
	if target != "" {
		if err := domain.ValidateTarget(target); err != nil {
			return nil, err
		}
	}
	ep, err := r.ownedEndpoint(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	// A session is named after its connection and Endpoint: unique per
	// subscription, and the sessions of one connection share a prefix.
	agentID := connectionID(ctx)
	if agentID == "" {
		agentID = commands.NewEventID()
	}
	agentID += "/" + ep.ID
	// The agent's own target is where it forwards; an agent that did not
	// name one is taken to use the Endpoint's.
	if target == "" {
		target = agentTarget(ctx)
	}
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

// completeForward hands the agent's report of one attempt to the tunnel;
// the attempt must be pending for the signed-in account.
func (r *Resolver) completeForward(ctx context.Context, input model.CompleteForwardInput) (bool, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return false, err
	}
	out, err := toOutcome(input)
	if err != nil {
		return false, err
	}
	if err := r.Hub.Complete(ctx, acc.ID, connectionID(ctx), out); err != nil {
		return false, err
	}
	return true, nil
}

func toForwardRequest(c domain.ForwardCommand) *model.ForwardRequest {
	return &model.ForwardRequest{
		AttemptID: c.AttemptID, DeliveryID: c.DeliveryID, Method: c.Method, Path: c.Target, PathBase64: rawBase64(c.Target),
		Headers: toHeaders(c.Headers), BodyBase64: base64.StdEncoding.EncodeToString(c.Body),
	}
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
