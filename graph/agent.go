package graph

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/tunnel"
)

// The agent's half of the API: the forwardRequests subscription attaches a
// session and streams its work; completeForward reports an attempt's
// outcome. Both only adapt between GraphQL and tunnel.Sessions.

// attachAgent registers a subscription as an agent session of an Endpoint
// and streams its forward requests. One connection may serve several
// Endpoints, one subscription (and session) each.
func (r *Resolver) attachAgent(ctx context.Context, endpointID, target string, primary bool, filters []domain.Filter) (<-chan *model.ForwardRequest, error) {
	if target != "" {
		if err := domain.ValidateTarget(target); err != nil {
			return nil, err
		}
	}
	ep, err := r.ownedEndpoint(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	// A session's start and end are kept in the account's agent stream
	// for good, counted in its stored bytes: none past its quota. Asked
	// first, so a refusal takes nothing from the session rate.
	if err := r.Service.CheckStorageQuota(ctx, ep.AccountID); err != nil {
		return nil, err
	}
	if err := r.limitSessions(ctx, ep.AccountID); err != nil {
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
	cmds, err := r.Hub.Attach(ctx, tunnel.SessionInfo{AgentID: agentID, EndpointID: ep.ID, AccountID: ep.AccountID, Target: target,
		Primary: primary, Filters: filters})
	if err != nil {
		return nil, err
	}
	out := make(chan *model.ForwardRequest)
	// A copy's bytes are counted against the body budget until its
	// frame is written: then the tunnel is told.
	written := func(c domain.ForwardCommand) func() {
		if !c.Copy {
			return nil
		}
		return func() { r.Hub.Written(agentID, c.AttemptID) }
	}
	if opID, send, ok := wsgql.BinaryOperation(ctx); ok {
		go pushFrames(ctx, opID, send, cmds, out, written)
		return out, nil
	}
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
				// On the GraphQL path a copy is counted until its result
				// is handed on; the socket's queue bounds it from there.
				select {
				case out <- toForwardRequest(c):
				case <-ctx.Done():
				}
				if w := written(c); w != nil {
					w()
				}
				if ctx.Err() != nil {
					return
				}
			}
		}
	}()
	return out, nil
}

// pushFrames sends an agent's forward requests as agentwire frames on a
// socket that agreed on its subprotocol; the GraphQL results stay empty
// and end (closing out) with the session, as they would on the GraphQL path.
// written(c), when not nil, runs once c's frame is written or dropped.
func pushFrames(ctx context.Context, opID string, send func(context.Context, []byte, func()) error, cmds <-chan domain.ForwardCommand,
	out chan<- *model.ForwardRequest, written func(domain.ForwardCommand) func()) {
	defer close(out)
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-cmds:
			if !ok {
				return
			}
			f := agentwire.Forward{
				Operation: opID, AttemptID: c.AttemptID, DeliveryID: c.DeliveryID, Method: c.Method, Target: c.Target,
				Headers: c.Headers, Body: c.Body, Host: c.Host, Scheme: c.Scheme, RemoteAddr: c.RemoteAddr,
			}
			frame := agentwire.AppendForward(make([]byte, 0, agentwire.ForwardSize(f)), f)
			if send(ctx, frame, written(c)) != nil {
				return
			}
		}
	}
}

// completeFrame takes an agent's Complete frame, as completeForward takes
// its input, and answers with a Done frame: always on the subprotocols
// that acknowledge every Complete (agentwire.Acknowledges), else only when
// it refuses the answer. The outcome goes to the waiting sender once the
// Done frame, if any, is queued (the returned func). Only a frame that does
// not decode is an error (the socket closes with 4400).
func (r *Resolver) completeFrame(ctx context.Context, proto string, frame []byte) ([]byte, func(), error) {
	c, err := agentwire.DecodeComplete(frame)
	if err != nil {
		return nil, nil, err
	}
	var deliver func()
	done := agentwire.Done{AttemptID: c.AttemptID}
	out := domain.ForwardOutcome{AttemptID: c.AttemptID, Status: c.Status, Headers: c.Headers, Body: c.Body,
		Error: c.Error, Failure: c.Failure, DurationMs: c.DurationMs, Signature: c.Signature, Receipt: c.Receipt}
	err = checkSignatureVerdict(out.Signature)
	if err == nil && out.Receipt != nil {
		err = out.Receipt.Check("receipt")
	}
	if err == nil {
		deliver, err = r.claim(ctx, out, c.Status != 0)
	}
	if err != nil {
		done.Code, done.Message = Code(err), err.Error()
		if done.Code == "" {
			r.Logger.ErrorContext(ctx, "complete forward", "attempt_id", c.AttemptID, "error", err)
			done.Code, done.Message = "INTERNAL", "internal error"
		}
	}
	if done.Code == "" && !agentwire.Acknowledges(proto) {
		return nil, deliver, nil
	}
	return agentwire.AppendDone(nil, done), deliver, nil
}

// claim hands an agent's report of one attempt to the tunnel and returns
// what delivers it (tunnel.Hub.Claim); the attempt must be pending for the
// signed-in account. withStatus tells that the report gives a status.
func (r *Resolver) claim(ctx context.Context, out domain.ForwardOutcome, withStatus bool) (func(), error) {
	acc, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	if !withStatus && out.Error == "" {
		return nil, &domain.InvalidInputError{Field: "status", Reason: "give a status or an error"}
	}
	return r.Hub.Claim(ctx, acc.ID, connectionID(ctx), out)
}

// completeForward hands the agent's report of one attempt to the tunnel;
// the attempt must be pending for the signed-in account.
func (r *Resolver) completeForward(ctx context.Context, input model.CompleteForwardInput) (bool, error) {
	if _, err := r.account(ctx); err != nil {
		return false, err
	}
	out, err := toOutcome(input)
	if err != nil {
		return false, err
	}
	deliver, err := r.claim(ctx, out, input.Status != nil)
	if err != nil {
		return false, err
	}
	deliver()
	return true, nil
}

func toForwardRequest(c domain.ForwardCommand) *model.ForwardRequest {
	return &model.ForwardRequest{
		AttemptID: c.AttemptID, DeliveryID: c.DeliveryID, Method: c.Method, Path: c.Target, PathBase64: rawBase64(c.Target),
		Headers: toHeaders(c.Headers), BodyBase64: base64.StdEncoding.EncodeToString(c.Body),
		Host: c.Host, Scheme: c.Scheme, RemoteAddress: optional(c.RemoteAddr),
	}
}

// toOutcome reads the agent's report of one forward.
func toOutcome(in model.CompleteForwardInput) (domain.ForwardOutcome, error) {
	if err := checkAnswerHeaders(in.Headers); err != nil {
		return domain.ForwardOutcome{}, err
	}
	headers, err := fromHeaderInputs(in.Headers)
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	out := domain.ForwardOutcome{AttemptID: in.AttemptID, Headers: headers, Error: deref(in.Error), Failure: deref(in.Failure),
		Signature: deref(in.Signature)}
	if err := checkSignatureVerdict(out.Signature); err != nil {
		return out, err
	}
	if r := in.Receipt; r != nil {
		out.Receipt = &domain.FidelityDigests{RequestLine: r.RequestLine, Headers: r.Headers, Body: r.Body}
		if err := out.Receipt.Check("receipt"); err != nil {
			return out, err
		}
	}
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
	if in.Status != nil {
		// Which statuses a sender can get is the tunnel's rule (an
		// invalid one is recorded as a 502), not the API's.
		out.Status = *in.Status // with error set too: the agent's own 504
	}
	return out, nil
}

// checkAnswerHeaders holds an answer's headers to the bounds a C frame's
// are held to (agentwire.MaxAnswerHeaders, MaxAnswerHeaderBytes, names not
// empty), before they are copied; a value in base64, which replaces the
// text one, counts at its decoded length.
func checkAnswerHeaders(hs []*model.HeaderInput) error {
	if len(hs) > agentwire.MaxAnswerHeaders {
		return &domain.InvalidInputError{Field: "headers", Reason: fmt.Sprintf("at most %d headers", agentwire.MaxAnswerHeaders)}
	}
	size := 0
	for _, h := range hs {
		if h == nil {
			continue
		}
		if h.Name == "" {
			return &domain.InvalidInputError{Field: "headers.name", Reason: "must not be empty"}
		}
		size += len(h.Name)
		if h.ValueBase64 != nil {
			size += base64.StdEncoding.DecodedLen(len(*h.ValueBase64))
		} else {
			size += len(h.Value)
		}
		if size > agentwire.MaxAnswerHeaderBytes {
			return &domain.InvalidInputError{Field: "headers", Reason: fmt.Sprintf("at most %d bytes of names and values", agentwire.MaxAnswerHeaderBytes)}
		}
	}
	return nil
}

// maxSignatureVerdict bounds the signature verdict an agent reports: a
// scheme, a verdict and a short reason.
const maxSignatureVerdict = 200

// checkSignatureVerdict refuses a verdict that is not a short line.
func checkSignatureVerdict(v string) error {
	if len(v) > maxSignatureVerdict || strings.ContainsAny(v, "\x00\r\n") || !utf8.ValidString(v) {
		return &domain.InvalidInputError{Field: "signature", Reason: fmt.Sprintf("must be one line of UTF-8, at most %d bytes", maxSignatureVerdict)}
	}
	return nil
}
