package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// closeStaleAgents records the end of agent sessions a crash left open.
func closeStaleAgents(ctx context.Context, views interface {
	OpenAgentSessions(context.Context) ([]readmodel.AgentSession, error)
}, hub *tunnel.Hub, mine func(node string) bool) error {
	open, err := views.OpenAgentSessions(ctx)
	if err != nil {
		return fmt.Errorf("read agent sessions: %w", err)
	}
	stale := make([]tunnel.StaleSession, 0, len(open))
	for _, s := range open {
		if mine(s.Node) {
			stale = append(stale, tunnel.StaleSession{EndpointID: s.EndpointID, AgentID: s.AgentID})
		}
	}
	if err := hub.CloseStale(ctx, stale); err != nil {
		return fmt.Errorf("close stale agent sessions: %w", err)
	}
	return nil
}

// failStaleAttempts records the end of forwards a crash left open: their
// sender and agent went with the process, so no outcome will ever come.
func failStaleAttempts(ctx context.Context, views interface {
	OpenAttempts(context.Context) ([]readmodel.OpenAttempt, error)
}, rec *record.Recorder, log *slog.Logger, mine func(node string) bool) error {
	open, err := views.OpenAttempts(ctx)
	if err != nil {
		return fmt.Errorf("read open attempts: %w", err)
	}
	stale := make([]record.StaleAttempt, 0, len(open))
	for _, a := range open {
		if mine(a.Node) {
			stale = append(stale, record.StaleAttempt{DeliveryID: a.DeliveryID, AttemptID: a.AttemptID})
		}
	}
	if len(stale) == 0 {
		return nil
	}
	log.Warn("recording forwards a previous run left without an answer as failed", "attempts", len(stale))
	if err := rec.FailStale(ctx, stale, record.RestartedReason); err != nil {
		return fmt.Errorf("fail stale attempts: %w", err)
	}
	return nil
}

// addressResolver adapts the views to what ingress needs to route a request.
type addressResolver struct {
	views interface {
		Address(ctx context.Context, id string) (readmodel.Address, error)
	}
}

func (r addressResolver) Resolve(ctx context.Context, id string) (ingress.Route, error) {
	a, err := r.views.Address(ctx, id)
	if err != nil {
		return ingress.Route{}, err
	}
	return ingress.Route{
		ID: a.ID, Kind: a.Kind, AccountID: a.AccountID, Mode: a.Mode, ResponseCapture: a.ResponseCapture,
		Deleted: a.Deleted, Expired: a.Expired, LastActivityAt: a.LastActivityAt, ExpiresAt: a.ExpiresAt,
		StoredBytes: a.StoredBytes,
	}, nil
}
