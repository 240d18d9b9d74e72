package graph

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/dustin/go-humanize"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/readmodel"
)

// deliveryReader is how the field being resolved reads one delivery: with
// what only the log holds when the query selects it (see wantsPayload), its
// request and its latest answer each only when selected (payloadContext).
func (r *Resolver) deliveryReader(ctx context.Context) func(context.Context, string) (readmodel.Delivery, error) {
	if wantsPayload(ctx) {
		pctx := payloadContext(ctx)
		request, response := readmodel.WantsRequest(pctx), readmodel.WantsResponse(pctx)
		return func(ctx context.Context, id string) (readmodel.Delivery, error) {
			ctx = withPayloadParts(ctx, request, response)
			d, err := r.Views.Delivery(ctx, id)
			if err != nil {
				return d, err
			}
			return d, chargePayloads(ctx, d)
		}
	}
	return r.Views.DeliverySummary
}

// history reads a page of an address's history, with what only the log
// holds when the query selects it (see wantsPayload); with filter, only
// the deliveries that match.
func (r *Resolver) history(ctx context.Context, address string, first int, after string, filter *model.DeliveryFilter) (readmodel.Page, error) {
	if filter != nil {
		// Every filtered page walks the views on the search pool, and some
		// read the log too: each is admitted for its caller (searchlimit.go).
		f := toFilter(filter)
		release, err := r.admitSearch(ctx, r.callerKey(ctx), f.NeedsLog())
		if err != nil {
			return readmodel.Page{}, err
		}
		defer release()
		payload := wantsPayload(ctx)
		if payload {
			ctx = payloadContext(ctx)
		}
		p, err := r.Views.SearchDeliveries(ctx, address, first, after, f, payload)
		if err != nil || !payload {
			return p, err
		}
		return p, chargePayloads(ctx, p.Items...)
	}
	if wantsPayload(ctx) {
		ctx = payloadContext(ctx)
		// The page's request bodies are counted before they are read, and
		// the heap of the fields that will encode them taken with them: a
		// page the answers' budget refuses reads nothing of the log (each
		// such page read its bodies, megabytes, to be refused after), and
		// a page it admits is not refused half built for its fields.
		var admitted int64
		request := readmodel.WantsRequest(ctx)
		p, err := r.Views.DeliveriesAdmitted(ctx, address, first, after, func(rows []readmodel.Delivery) error {
			if !request {
				return nil // no request body is read
			}
			admitted = r.storedBodies(rows)
			if err := answersize.Charge(ctx, admitted); err != nil {
				return err
			}
			return answersize.Reserve(ctx, bodyEncodings(ctx, admitted))
		})
		if err != nil {
			return p, err
		}
		return p, chargePayloadsBeyond(ctx, admitted, p.Items...)
	}
	return r.Views.DeliverySummaries(ctx, address, first, after)
}

// chargePayloads counts the payloads just loaded against the answer's
// budget (answersize): they are held until the answer is written, whatever
// fields end up encoding them.
func chargePayloads(ctx context.Context, ds ...readmodel.Delivery) error {
	return chargePayloadsBeyond(ctx, 0, ds...)
}

// chargePayloadsBeyond is chargePayloads for payloads of which admitted
// bytes were counted before they were read (storedBodies).
func chargePayloadsBeyond(ctx context.Context, admitted int64, ds ...readmodel.Delivery) error {
	var n int64
	for _, d := range ds {
		n += int64(len(d.Body) + len(d.ResponseBody))
		for _, h := range d.Headers {
			n += int64(len(h.Name) + len(h.Value))
		}
	}
	return answersize.Charge(ctx, n-admitted)
}

// storedBodies is the most the request bodies of rows (as the views hold
// them, without their bodies) can hold once read from the log: each is
// stored up to the capture cap.
func (r *Resolver) storedBodies(rows []readmodel.Delivery) int64 {
	var n int64
	for _, d := range rows {
		n += min(d.BodySize, r.captureCap)
	}
	return n
}

// watchDeliveries streams rows of an address (a, as canWatch read it) as
// they are created or updated, until the subscription ends. With since, it
// first sends the rows changed after that cursor: the watch is registered
// before they are read, so a change lands in the replay, in the live
// stream or in both, never in neither.
func (r *Resolver) watchDeliveries(ctx context.Context, a readmodel.Address, since *string) (<-chan *model.Delivery, error) {
	address, owner := a.ID, liveReader(a)
	if since != nil {
		if err := r.admitReplay(ctx); err != nil {
			return nil, err
		}
	}
	if !r.watching.Take(address, MaxWatchersPerAddress) {
		return nil, &RateLimitedError{RetryAfter: watchRetryAfter,
			Reason: fmt.Sprintf("%d live subscriptions of this address are open", MaxWatchersPerAddress)}
	}
	read := r.deliveryReader(ctx)
	payload := wantsPayload(ctx)
	pctx := payloadContext(ctx)
	request, response := payload && readmodel.WantsRequest(pctx), payload && readmodel.WantsResponse(pctx)
	changes, stopWatch := r.Views.Watch(address)
	stop := func() {
		stopWatch()
		r.watching.Release(address)
	}
	var replay []string
	if since != nil {
		// The index walk takes the socket's turn, as row loads do: a
		// client that subscribes a hundred times at once gets its walks
		// one after another instead of queuing a hundred on the views'
		// few connections ahead of every other reader.
		turn, err := wsgql.AwaitRoom(ctx)
		if err != nil {
			stop()
			return nil, err
		}
		ids, err := r.Views.ChangedSince(ctx, address, *since)
		turn.Release()
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
			replayed := func(ctx context.Context) (*model.Delivery, error) {
				d, err := read(ctx, id)
				return toDelivery(d), err
			}
			if !r.sendDelivery(ctx, out, id, replayed) {
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
				if ch.Behind {
					// The views dropped this watch: it fell behind their
					// changes (projections.History.Watch). Say so, so
					// the client subscribes again with since.
					wsgql.EndWith(ctx, r.presentError(ctx, ErrFellBehind))
					return
				}
				live := func(ctx context.Context) (*model.Delivery, error) {
					return r.liveRow(ctx, ch, owner, payload, request, response)
				}
				if !r.sendDelivery(ctx, out, ch.DeliveryID, live) {
					return
				}
			}
		}
	}()
	return out, nil
}

// MaxWatchersPerAddress is how many deliveries subscriptions one address
// serves at once, over every client, as many as its smee streams
// (ingress.MaxStreamsPerAddress): one more is refused RATE_LIMITED.
const MaxWatchersPerAddress = 128

// watchRetryAfter is what a subscription refused for its address's cap is
// told to wait: the console's longest reconnect step.
const watchRetryAfter = 15 * time.Second

// ErrFellBehind ends a deliveries subscription whose watch the views
// dropped: it was too far behind the address's changes, or behind while
// the relay's live subscriptions held their memory budget.
var ErrFellBehind = errors.New("this live subscription fell behind the address's changes and was ended; subscribe again with since (the cursor of the newest row you have) to catch up")

// liveRowLoadTimeout bounds a row's load that subscriptions share: it runs
// apart from the subscription that started it, which may end meanwhile.
const liveRowLoadTimeout = 30 * time.Second

// liveRowKey names a delivery as a change left it: every subscription
// told of that change gets the same row (read once it was announced, so
// it holds the change), with or without what only the log holds.
type liveRowKey struct {
	id       string
	position uint64
	payload  bool
	request  bool // the request read (payloadContext)
	response bool // the latest answer read (payloadContext)
}

// liveReader is the reader (readmodel.WithReader) the live rows of
// address a are read as: the address's owner, whose operations read as
// the same reader. An Endpoint's account; an inspector's, the client
// network that created it (readmodel.Address.Network, which is the
// reader an anonymous client of that network reads as), or the inspector
// itself when the views know none (one created before they kept it).
func liveReader(a readmodel.Address) string {
	switch {
	case a.Kind != domain.AddressInspector:
		return readmodel.ReaderKey("account:" + a.AccountID)
	case a.Network != "":
		return a.Network
	default:
		return "inspector:" + a.ID
	}
}

// liveRow is the row a change of a delivery left, read once for every
// subscription of its address told of it (Resolver.liveRows), not once
// per subscription: one client's many subscriptions of an address would
// otherwise turn each request into as many reads of the views' few
// connections and of the log, and as many copies of its body.
//
// It is read as owner (liveReader), within the owner's share of the
// views' readers and of the log's reads, not as the subscriber: every
// subscription of the address waits for it, whoever's share it would
// take. Read as the relay's own, in no one's share, one account's
// subscriptions of its many addresses held every connection of the log
// with reads of its deliveries (8 of them held the embedded log's 4), and
// other accounts' reads waited for them.
func (r *Resolver) liveRow(ctx context.Context, ch readmodel.Change, owner string, payload, request, response bool) (*model.Delivery, error) {
	key := liveRowKey{id: ch.DeliveryID, position: ch.Position, payload: payload, request: request, response: response}
	m, err := r.liveRows.Get(ctx, key, func() (*model.Delivery, error) {
		lctx, cancel := context.WithTimeout(readmodel.WithReader(context.WithoutCancel(ctx), owner), liveRowLoadTimeout)
		defer cancel()
		lctx = withPayloadParts(lctx, request, response)
		read := r.Views.DeliverySummary
		if payload {
			read = r.Views.Delivery
		}
		d, err := read(lctx, ch.DeliveryID)
		if err != nil {
			return nil, fmt.Errorf("read live row: %w", err)
		}
		return toDelivery(d), nil
	})
	if err != nil || !payload {
		return m, err
	}
	// Each subscription's answer is charged for the payload it sends,
	// shared or not.
	return m, chargePayloads(ctx, m.Row)
}

// sendDelivery loads a delivery's row and sends it on out; it returns
// false when the subscription ended. A delivery that cannot be read is
// logged and skipped: the next change of it sends it again.
//
// It loads a row only when the socket has room for it and only one row per
// socket at a time until that row is queued (wsgql.AwaitRoom): rows to a
// client that stops reading hold one row, not one per subscription.
func (r *Resolver) sendDelivery(ctx context.Context, out chan<- *model.Delivery, id string, load func(context.Context) (*model.Delivery, error)) bool {
	turn, err := wsgql.AwaitRoom(ctx)
	if err != nil {
		return false
	}
	m, err := load(ctx)
	if err != nil {
		turn.Release()
		if ctx.Err() != nil {
			return false
		}
		r.Logger.WarnContext(ctx, "deliveries subscription read", "delivery_id", id, "error", err)
		return true
	}
	// The turn passes once the row's message is queued, not when it leaves
	// here: gqlgen still encodes it, and a row per subscription waiting
	// for room would be held otherwise.
	turn.HandOn()
	select {
	case out <- m:
		return true
	case <-ctx.Done():
		return false
	}
}

// toFilter is the API's filter as the views take it.
func toFilter(f *model.DeliveryFilter) readmodel.DeliveryFilter {
	var out readmodel.DeliveryFilter
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	num := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	flag := func(p *bool) bool { return p != nil && *p }
	out.Method, out.Path, out.PathPrefix = str(f.Method), str(f.Path), str(f.PathPrefix)
	out.Status, out.StatusClass, out.AttemptStatus = num(f.Status), num(f.StatusClass), num(f.AttemptStatus)
	out.Pending, out.IncompleteBody, out.DroppedHeaders = flag(f.Pending), flag(f.IncompleteBody), flag(f.DroppedHeaders)
	out.RefusedOffline = flag(f.RefusedOffline)
	out.Header, out.HeaderValue, out.BodyContains = str(f.Header), str(f.HeaderValue), str(f.BodyContains)
	out.ProviderEvent, out.ProviderDeliveryID = str(f.ProviderEvent), str(f.ProviderDeliveryID)
	if f.ReceivedAfter != nil {
		out.ReceivedAfter = *f.ReceivedAfter
	}
	if f.ReceivedBefore != nil {
		out.ReceivedBefore = *f.ReceivedBefore
	}
	return out
}

// attemptsWithResponses is a delivery's attempts, with what each got back
// read from the log when the query selects it (an attempt's response), and
// the bodies its edited retries sent when it selects their edits.
func (r *Resolver) attemptsWithResponses(ctx context.Context, d *model.Delivery) ([]*model.Attempt, error) {
	return r.withResponses(ctx, d, d.Attempts, true)
}

// attemptByID is Delivery.attempt: one attempt, its response read alone.
func (r *Resolver) attemptByID(ctx context.Context, d *model.Delivery, id string) (*model.Attempt, error) {
	for _, a := range d.Attempts {
		if a.ID != id {
			continue
		}
		out, err := r.withResponses(ctx, d, []*model.Attempt{a}, false, id)
		if err != nil {
			return nil, err
		}
		return out[0], nil
	}
	return nil, nil
}

// withResponses is attempts (of d; a list field when list, else one
// attempt) with the responses and edited bodies the field being resolved
// selects; only names the attempts to read (all when it names none). It
// fills copies: a delivery's row may be shared (a live row goes to every
// subscription of its address, each selecting its own fields), and
// fields selected beside each other (attempts and attempt) resolve at once.
func (r *Resolver) withResponses(ctx context.Context, d *model.Delivery, shared []*model.Attempt, list bool, only ...string) ([]*model.Attempt, error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || len(shared) == 0 {
		return shared, nil
	}
	edits := selects(fc.Field.Selections, editField, map[*ast.FragmentDefinition]bool{})
	responses := fieldSelections(fc.Field.Selections, "response", map[*ast.FragmentDefinition]bool{})
	if !edits && len(responses) == 0 {
		return shared, nil // nothing to fill
	}
	attempts := make([]*model.Attempt, len(shared))
	for i, a := range shared {
		c := *a
		if a.Edit != nil {
			e := *a.Edit
			c.Edit = &e
		}
		attempts[i] = &c
	}
	if edits {
		if err := r.editBodies(ctx, d, attempts); err != nil {
			return nil, err
		}
	}
	if len(responses) == 0 {
		return attempts, nil
	}
	bodies := false
	for _, set := range responses {
		bodies = bodies || selects(set, responseBodyFields, map[*ast.FragmentDefinition]bool{})
	}
	maxBody := int64(0) // none read
	if bodies {
		maxBody = math.MaxInt64 // each whole, within what one read keeps
	}
	got, err := r.Views.AttemptResponses(ctx, d.ID, maxBody, only...)
	if err != nil {
		return nil, err
	}
	var n int64
	for i, a := range attempts {
		resp, ok := got[a.ID]
		if !ok {
			continue
		}
		if resp.NotRead != "" {
			// Past one read's bounds or the answer's log budget: null,
			// saying why and how to read it.
			path := slices.Clone(fc.Path())
			if list {
				path = append(path, ast.PathIndex(i))
			}
			how := "alone with the delivery's attempt field"
			if resp.NotRead == readmodel.NotReadLogBudget {
				resp.NotRead += " (" + humanize.IBytes(uint64(readmodel.LogBudgetOf(ctx).Limit())) + ")"
				how = "in a query of its own, with the delivery's attempt field"
			}
			graphql.AddError(ctx, &gqlerror.Error{
				Message: fmt.Sprintf("%s; read attempt %s %s", resp.NotRead, a.ID, how),
				Path:    append(path, ast.PathName("response")),
				Err:     answersize.ErrTooLarge,
			})
			continue
		}
		m := &model.AttemptResponse{Status: resp.Status, Headers: toHeaders(resp.Headers), Captured: resp.Captured, NotCaptured: optional(resp.NotCaptured)}
		if resp.Captured && bodies {
			m.Body = text(resp.Body)
			b := base64.StdEncoding.EncodeToString(resp.Body)
			m.BodyBase64 = &b
		}
		a.Response = m
		n += int64(len(resp.Body))
		for _, h := range resp.Headers {
			n += int64(len(h.Name) + len(h.Value))
		}
	}
	return attempts, answersize.Charge(ctx, n)
}

// responseBodyFields are AttemptResponse's fields that need its body: an
// attempt's response is read from the log when selected, its body only
// when one of these is.
var responseBodyFields = map[string]bool{"body": true, "bodyBase64": true}

// editField is Attempt.edit, whose body is read when selected.
var editField = map[string]bool{"edit": true}

// editBodies reads the bodies d's edited retries sent into their edits.
// The answer's budget is charged for them (as text and base64) before any
// is read, so a delivery of many large edits is refused, not read whole.
func (r *Resolver) editBodies(ctx context.Context, d *model.Delivery, attempts []*model.Attempt) error {
	sizes := map[string]int64{}
	for _, a := range d.Row.Attempts {
		if a.EditBodySize != nil {
			sizes[a.ID] = *a.EditBodySize
		}
	}
	var n int64
	for _, a := range attempts {
		if a.Edit != nil {
			n += sizes[a.ID] * 7 / 3 // the text and its base64
		}
	}
	if n == 0 {
		return nil
	}
	if err := answersize.Charge(ctx, n); err != nil {
		return err
	}
	for _, a := range attempts {
		if _, sent := sizes[a.ID]; !sent || a.Edit == nil {
			continue
		}
		body, ok, err := r.Views.AttemptEditBody(ctx, d.ID, a.ID)
		if err != nil {
			return err
		}
		if ok {
			a.Edit.Body = text(body)
			b := base64.StdEncoding.EncodeToString(body)
			a.Edit.BodyBase64 = &b
		}
	}
	return nil
}
