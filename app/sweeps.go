package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// openWork is what recovery reads of the views: what the log holds open.
type openWork interface {
	OpenAgentSessions(context.Context) ([]readmodel.AgentSession, error)
	OpenAttempts(context.Context) ([]readmodel.OpenAttempt, error)
}

// goneReason says why a node's open work ended: what its sessions' end
// and its attempts' failure record.
type goneReason struct {
	session, attempt string
}

var (
	// restarted: this node's own earlier run, which a crash ended.
	restarted = goneReason{session: domain.SessionRelayRestarted, attempt: domain.FailureRestarted}
	// nodeLost: another node of a cluster, whose lease lapsed.
	nodeLost = goneReason{session: domain.SessionNodeLost, attempt: domain.FailureNodeLostBeforeAnswer}
)

// recoverGone ends what nodes that are gone left open, for every node gone
// names: the agent sessions they held (their agents went with them) and
// the forwards whose senders waited on them (no outcome will ever come).
// One node runs it at start for its own earlier run; a cluster's reaper
// runs it for the nodes whose lease lapsed. Sessions attached to hub are
// live and kept.
func recoverGone(ctx context.Context, views openWork, hub *tunnel.Hub, rec *record.Recorder, log *slog.Logger,
	gone func(node string) bool, why goneReason) error {
	sessions, err := views.OpenAgentSessions(ctx)
	if err != nil {
		return fmt.Errorf("read agent sessions: %w", err)
	}
	var staleSessions []tunnel.StaleSession
	for _, s := range sessions {
		if gone(s.Node) {
			staleSessions = append(staleSessions, tunnel.StaleSession{EndpointID: s.EndpointID, AgentID: s.AgentID})
		}
	}
	var errs []error
	if len(staleSessions) > 0 {
		log.Warn("closing agent sessions left open", "sessions", len(staleSessions), "reason", why.session)
		if err := hub.CloseStale(ctx, staleSessions, why.session); err != nil {
			errs = append(errs, fmt.Errorf("close stale agent sessions: %w", err))
		}
	}
	attempts, err := views.OpenAttempts(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("read open attempts: %w", err))...)
	}
	var staleAttempts []record.StaleAttempt
	for _, a := range attempts {
		if gone(a.Node) {
			staleAttempts = append(staleAttempts, record.StaleAttempt{DeliveryID: a.DeliveryID, AttemptID: a.AttemptID})
		}
	}
	if len(staleAttempts) > 0 {
		log.Warn("recording forwards left without an answer as failed", "attempts", len(staleAttempts), "reason", why.attempt)
		if err := rec.FailStale(ctx, staleAttempts, why.attempt); err != nil {
			errs = append(errs, fmt.Errorf("fail stale attempts: %w", err))
		}
	}
	return errors.Join(errs...)
}

// addressResolver adapts the views to what ingress needs to route a request.
type addressResolver struct {
	views interface {
		Address(ctx context.Context, id string) (readmodel.Address, error)
	}
	// accounts reads an Endpoint's account's stored bytes and quota
	// override; quotas are the relay's defaults.
	accounts interface {
		AccountQuota(ctx context.Context, id string) (readmodel.AccountUsage, error)
	}
	quotas commands.QuotaDefaults
	// guests reads what guest inspectors store, in all and per network.
	guests interface {
		GuestStored(network string) (total, ofNetwork int64)
	}
	// signups reads what the accounts made by open sign-up store, in all
	// and per network.
	signups interface {
		SignupStored(network string) (total, ofNetwork int64)
	}
}

func (r addressResolver) Resolve(ctx context.Context, id string) (ingress.Route, error) {
	a, err := r.views.Address(ctx, id)
	if err != nil {
		return ingress.Route{}, err
	}
	route := ingress.Route{
		ID: a.ID, Kind: a.Kind, AccountID: a.AccountID, Mode: a.Mode, ResponseCapture: a.ResponseCapture,
		Deleted: a.Deleted, Expired: a.Expired, LastActivityAt: a.LastActivityAt, ExpiresAt: a.ExpiresAt,
		StoredBytes: a.StoredBytes, Answer: a.Answers.Answer, Handshakes: a.Answers.Handshakes, Filters: a.Filters,
		Smee: a.Smee, SmeeKeyHash: a.SmeeKeyHash,
	}
	if a.Kind == domain.AddressInspector && r.guests != nil {
		route.Network = a.Network
		route.GuestStored, route.GuestNetworkStored = r.guests.GuestStored(a.Network)
	}
	if a.Kind != domain.AddressEndpoint || a.Deleted || r.accounts == nil {
		return route, nil
	}
	u, err := r.accounts.AccountQuota(ctx, a.AccountID)
	if err != nil {
		return ingress.Route{}, fmt.Errorf("quota of account %s: %w", a.AccountID, err)
	}
	route.AccountStoredBytes = u.StoredBytes
	route.AccountStorage, route.AccountRate = commands.EffectiveQuota(r.quotas, u.StorageQuota, u.RateQuota)
	if r.signups != nil && domain.InSignupStorage(u.Origin, u.StorageQuota) {
		route.InSignupStorage, route.AccountNetwork = true, u.Network
		route.SignupStored, route.SignupNetworkStored = r.signups.SignupStored(u.Network)
	}
	return route, nil
}
