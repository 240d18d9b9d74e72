package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/flight"
	"github.com/relayhq/relay/record"
)

// serveQueue records a request to a QUEUE Endpoint and answers the sender
// at once with the Endpoint's answer (default 202 naming the delivery);
// the queue driver forwards it later (docs/queue.md). The whole request
// must be in the log to be forwarded later, so a queued body is held to
// the capture cap and its headers to the header limits; beyond, the
// sender is refused (413, 431) and the refusal recorded.
func (s *Server) serveQueue(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route) {
	id := s.deps.NewDeliveryID()
	c, ok := s.captureToForward(ctx, w, r, route, id, s.cfg.CaptureCap, forwardRefusals{
		tooLarge: func(e *BodyTooLargeError) (string, string) {
			return "queue: " + e.Error(), fmt.Sprintf("Request body larger than %d bytes, the most a QUEUE Endpoint keeps to forward later\n", e.Max)
		},
		busy: "relay busy; retry later",
	})
	defer releaseBody(s.bodies, r, route.AccountID, c.reserved)
	if !ok {
		return
	}
	req, full, received := c.req, c.full, c.received
	if req.DroppedHeaders > 0 {
		s.recordAnswer(ctx, w, id, route, req, answer{
			status: http.StatusRequestHeaderFieldsTooLarge,
			reason: "queue: headers past the relay's limits cannot be queued",
			body:   "Request headers past the relay's limits: a QUEUE Endpoint must keep them all to forward later\n",
		})
		return
	}
	req.Body = full
	if a, ok := s.handshake(route, &req, full); ok {
		s.recordAnswer(ctx, w, id, route, req, a)
		return
	}
	// Filters apply as in PROXY mode: a delivery the Endpoint's filters
	// refuse, or that no connected listener's filters take, is recorded
	// and answered as a LOG Endpoint answers, never queued. With no
	// listener connected it is queued; the listeners' filters apply again
	// when it is sent.
	if why, filtered := s.filtered(route, req, received, full); filtered {
		a := configuredAnswer(route)
		a.reason = domain.ReasonFiltered + why
		s.recordAnswer(ctx, w, id, route, req, a)
		return
	}
	if depth, full := s.queueFull(ctx, route.ID); full {
		s.recordAnswer(ctx, w, id, route, req, answer{
			status: http.StatusServiceUnavailable, reason: fmt.Sprintf("queue: backlog full (%d deliveries)", depth),
			body: noAgentBody("the Endpoint's queue is full; retry later"), retryAfter: 60,
		})
		return
	}
	a := queueAnswer(route, id)
	err := s.deps.Recorder.ReceiveQueued(ctx, receipt(id, route, req), a.status, a.reason)
	var broken *record.InvariantError
	switch {
	case errors.As(err, &broken):
		s.invariantBroken(ctx, w, id, route.ID, req.Method, broken.Err)
		return
	case err != nil:
		s.storeUnavailable(ctx, w, id, route.ID, req.Method, err)
		return
	}
	a.write(w)
	s.logDelivery(ctx, id, route.ID, req.Method, a.status)
}

// queueAnswer is the Endpoint's configured answer, else 202 with a short
// JSON body naming the delivery.
func queueAnswer(route Route, id string) answer {
	if route.Answer != nil {
		a := configuredAnswer(route)
		a.reason = domain.ReasonQueued
		return a
	}
	return answer{status: domain.DefaultQueueAnswer, reason: domain.ReasonQueued, own: true,
		headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}}, body: domain.QueueAnswerBody(id) + "\n"}
}

// DefaultMaxQueueBacklog is Config.MaxQueueBacklog's default.
const DefaultMaxQueueBacklog = 100_000

// backlogTTL is how long a QUEUE Endpoint's counted backlog is trusted: one
// count of the view per Endpoint per second, however many senders.
const backlogTTL = time.Second

// backlogCountsShared is how many counts in progress, or just made, the
// backlog cache keeps to share among the deliveries that find the same
// count expired at once.
const backlogCountsShared = 1024

// backlogCache keeps each QUEUE Endpoint's latest backlog count, and
// shares a count among the deliveries that find it expired together: one
// count per Endpoint per expiry, however many arrive at that moment.
type backlogCache struct {
	mu     sync.Mutex
	counts map[string]backlogCount
	resets int // times counts was emptied, so a count kept from before is not taken for one after
	shared flight.Cache[backlogKey, int]
}

type backlogCount struct {
	n  int
	at time.Time
}

// backlogKey names one count: the Endpoint's, replacing the count made at
// at (zero when there was none since counts was last emptied, resets), so
// the deliveries that found the same count expired share the next, and
// none takes a count made before for the next.
type backlogKey struct {
	endpointID string
	at         time.Time
	resets     int
}

// queueFull tells whether the Endpoint's backlog is at its bound. The
// count is up to a second old, so a burst may pass the bound by what
// arrives in that second; the deliveries that find it expired together
// wait for one count; a count that fails lets the delivery in (the
// account's storage quota still bounds it).
func (s *Server) queueFull(ctx context.Context, endpointID string) (int, bool) {
	if s.deps.QueueDepth == nil {
		return 0, false
	}
	now := time.Now()
	c := &s.backlogs
	c.mu.Lock()
	got, ok := c.counts[endpointID]
	resets := c.resets
	c.mu.Unlock()
	if !ok || now.Sub(got.at) > backlogTTL {
		// The count runs in the first caller for all of them, so it does
		// not end with that caller's request.
		n, err := c.shared.Get(ctx, backlogKey{endpointID: endpointID, at: got.at, resets: resets}, func() (int, error) {
			n, err := s.deps.QueueDepth(context.WithoutCancel(ctx), endpointID)
			if err != nil {
				return 0, fmt.Errorf("count queue backlog of %q: %w", endpointID, err)
			}
			c.mu.Lock()
			if c.counts == nil || len(c.counts) > 100_000 {
				c.counts = map[string]backlogCount{}
				c.resets++
			}
			c.counts[endpointID] = backlogCount{n: n, at: now}
			c.mu.Unlock()
			return n, nil
		})
		if err != nil {
			s.log.WarnContext(ctx, "ingress: count queue backlog", "address", endpointID, "error", err)
			return 0, false
		}
		got.n = n
	}
	max := s.cfg.MaxQueueBacklog
	if max <= 0 {
		max = DefaultMaxQueueBacklog
	}
	return got.n, got.n >= max
}
