package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
)

// Bounds of one retention sweep, so a backlog is worked off over several
// sweeps instead of in one long burst of writes.
const (
	sweepInspectors = 100 // purge decisions per sweep
	sweepStreams    = 500 // delivery streams deleted per page
	sweepPages      = 20  // pages per sweep
)

// SweepResult tells what one retention sweep did.
type SweepResult struct {
	Purged  int // inspectors whose deliveries were decided to go
	Deleted int // delivery streams deleted
}

// SweepRetention removes the deliveries of guest inspectors expired for
// longer than retention at now. Each removal is first decided on the
// inspector's stream (inspector.purged.v1, with the expiry if no request
// recorded it); then the inspector's delivery streams are deleted, each
// leaving a tombstone the views drop its row on. Deleting goes by what the
// views still hold of purged inspectors, so a sweep interrupted between the
// decision and the deletions is finished by the next one.
func (s *Service) SweepRetention(ctx context.Context, now time.Time, retention time.Duration) (SweepResult, error) {
	var res SweepResult
	// Decide on views that hold every delivery appended so far: an
	// inspector's last activity comes from them.
	if err := s.catchUp(ctx); err != nil {
		return res, err
	}
	candidates, err := s.views.PurgeCandidates(ctx, now, retention, sweepInspectors)
	if err != nil {
		return res, err
	}
	for _, c := range candidates {
		purged, err := s.purge(ctx, c.ID, c.LastActivityAt, now, retention, c.Deliveries)
		if err != nil {
			return res, fmt.Errorf("purge inspector %s: %w", c.ID, err)
		}
		if purged {
			res.Purged++
		}
	}
	for range sweepPages {
		ids, err := s.views.PurgedDeliveries(ctx, sweepStreams)
		if err != nil || len(ids) == 0 {
			return res, err
		}
		for _, id := range ids {
			_, err := s.rec.Delete(ctx, domain.DeliveryStream(id), domain.Any())
			switch {
			case err == nil:
				res.Deleted++
			case errors.Is(err, domain.ErrStreamDeleted):
				// Deleted by an earlier sweep; its tombstone drops the row.
			default:
				return res, fmt.Errorf("delete delivery %s: %w", id, err)
			}
		}
		// The tombstones reach the views before the next page is listed.
		if err := s.catchUp(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// purge records the decision to remove an inspector's deliveries, if its
// retention has run out, and waits for the views to apply it. It reports
// whether this call recorded it.
func (s *Service) purge(ctx context.Context, id string, lastActivity, now time.Time, retention time.Duration, deliveries int64) (bool, error) {
	position, err := s.rec.PurgeIfRetained(ctx, id, lastActivity, now, retention, deliveries)
	if err != nil || position == 0 {
		return false, err
	}
	return true, s.waitForViews(ctx, position)
}

// catchUp waits until the views have applied every event appended so far.
func (s *Service) catchUp(ctx context.Context) error {
	last, err := s.store.LastPosition(ctx)
	if err != nil {
		return fmt.Errorf("read last position: %w", err)
	}
	if err := s.views.WaitFor(ctx, last); err != nil {
		return fmt.Errorf("wait for projections: %w", err)
	}
	return nil
}

// RunRetention sweeps every interval until ctx ends (see SweepRetention).
// A failed sweep is logged and tried again at the next interval.
func (s *Service) RunRetention(ctx context.Context, interval, retention time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, err := s.SweepRetention(ctx, s.now(), retention)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "retention sweep failed", "error", err)
		case res.Purged > 0 || res.Deleted > 0:
			s.log.InfoContext(ctx, "retention sweep", "inspectors_purged", res.Purged, "deliveries_deleted", res.Deleted)
		}
	}
}

// Bounds of one sweep of Endpoints' retention. The pages are many more than
// inspectors' (500 000 streams a sweep): an Endpoint records at its address
// rate (50/s by default) however long the sweep interval, so a sweep must
// delete far more than that rate times the interval (10 min at most).
const sweepEndpoints = 100 // retention decisions per sweep

// Pages of an Endpoints' sweep; variables so a test can make a sweep small.
var (
	sweepEndpointPages   = 1000         // pages deleted per sweep
	sweepEndpointStreams = sweepStreams // delivery streams per page
)

// EndpointSweepResult tells what one sweep of Endpoints' retention did.
type EndpointSweepResult struct {
	Decided int // Endpoints whose old deliveries were decided to go
	Deleted int // delivery streams deleted
}

// SweepEndpointRetention removes the deliveries of Endpoints received
// longer ago than their window (the Endpoint's own or the relay's default,
// never beyond the maximum) at now. As for inspectors, each removal is
// first decided on the Endpoint's stream (endpoint.retained.v1, naming the
// window, the cutoff and the number of deliveries), then the delivery
// streams are deleted by what the views still hold below the latest
// decision's cutoff, so an interrupted sweep is finished by the next one.
// A delivery a forward still waits on is neither counted nor deleted.
func (s *Service) SweepEndpointRetention(ctx context.Context, now time.Time) (EndpointSweepResult, error) {
	var res EndpointSweepResult
	limits := s.cfg.Retention
	if limits.Default <= 0 {
		return res, nil // retention off: keep everything
	}
	if err := s.catchUp(ctx); err != nil {
		return res, err
	}
	s.retainMu.Lock()
	after := s.retainedAfter
	s.retainMu.Unlock()
	candidates, err := s.views.RetentionCandidates(ctx, now, limits, after, sweepEndpoints)
	if err != nil {
		return res, err
	}
	for _, c := range candidates {
		// Passed even if its decision fails, so one Endpoint that cannot
		// be decided does not stop the others' at every sweep.
		s.retainMu.Lock()
		s.retainedAfter = c.ID
		s.retainMu.Unlock()
		position, err := s.rec.RetainEndpoint(ctx, c.ID, c.Window, now, c.LastActivityAt, c.Deliveries, c.DeliveriesAtLeast)
		if err != nil {
			return res, fmt.Errorf("retention of endpoint %s: %w", c.ID, err)
		}
		if position == 0 {
			continue
		}
		res.Decided++
		if err := s.waitForViews(ctx, position); err != nil {
			return res, err
		}
	}
	for range sweepEndpointPages {
		s.retainMu.Lock()
		after := s.deletedAfter
		s.retainMu.Unlock()
		ids, last, err := s.views.RetainedDeliveries(ctx, after, sweepEndpointStreams)
		if err != nil || len(ids) == 0 {
			return res, err
		}
		s.retainMu.Lock()
		s.deletedAfter = last
		s.retainMu.Unlock()
		n, err := s.deleteDeliveries(ctx, ids)
		res.Deleted += n
		if err != nil {
			return res, err
		}
		if err := s.catchUp(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// sweepDeleters is how many stream deletions a sweep has in flight at
// once: the embedded log commits concurrent ones in one transaction and
// one fsync (group commit), which one at a time would each pay for.
const sweepDeleters = 8

// deleteDeliveries deletes the streams of ids, sweepDeleters at a time, and
// returns how many it deleted; a stream deleted before is skipped.
func (s *Service) deleteDeliveries(ctx context.Context, ids []string) (int, error) {
	var (
		mu      sync.Mutex
		deleted int
		errs    []error
		wg      sync.WaitGroup
		next    = make(chan string)
	)
	for range min(sweepDeleters, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				_, err := s.rec.Delete(ctx, domain.DeliveryStream(id), domain.Any())
				mu.Lock()
				switch {
				case err == nil:
					deleted++
				case errors.Is(err, domain.ErrStreamDeleted):
					// Deleted before; its tombstone drops the row.
				default:
					errs = append(errs, fmt.Errorf("delete delivery %s: %w", id, err))
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- id
	}
	close(next)
	wg.Wait()
	if len(errs) == 0 && ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return deleted, errors.Join(errs...)
}

// RunEndpointRetention sweeps Endpoints' retention every interval until
// ctx ends, when leader says this node is the one to (nil: always; a
// cluster's nodes sweep one at a time). A failed sweep is logged and tried
// again at the next interval.
func (s *Service) RunEndpointRetention(ctx context.Context, interval time.Duration, leader func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if leader != nil && !leader() {
			continue
		}
		res, err := s.SweepEndpointRetention(ctx, s.now())
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "endpoint retention sweep failed", "error", err)
		case res.Decided > 0 || res.Deleted > 0:
			s.log.InfoContext(ctx, "endpoint retention sweep", "endpoints_decided", res.Decided, "deliveries_deleted", res.Deleted)
		}
	}
}
