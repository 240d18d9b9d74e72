package graph

import (
	"context"
	"time"

	"github.com/relayhq/relay/explain"
	"github.com/relayhq/relay/readmodel"
)

// Views is what the API reads of the read models. Queries read them
// directly; only mutations go through the service.
type Views interface {
	Inspector(ctx context.Context, id string) (readmodel.Inspector, error)
	Endpoint(ctx context.Context, id string) (readmodel.Endpoint, error)
	// Endpoints lists an account's Endpoints oldest first, after the one
	// after names ("": from the first; not one of the account's:
	// domain.ErrNotFound), at most limit of them (0: all).
	Endpoints(ctx context.Context, accountID, after string, limit int) ([]readmodel.Endpoint, error)
	Address(ctx context.Context, id string) (readmodel.Address, error)

	// Delivery and DeliveriesAdmitted read headers and bodies from the
	// log, a page once admit accepts its rows as the views hold them;
	// DeliverySummary and DeliverySummaries do not (see payload.go).
	Delivery(ctx context.Context, id string) (readmodel.Delivery, error)
	DeliverySummary(ctx context.Context, id string) (readmodel.Delivery, error)
	DeliveriesAdmitted(ctx context.Context, address string, first int, after string, admit func([]readmodel.Delivery) error) (readmodel.Page, error)
	DeliverySummaries(ctx context.Context, address string, first int, after string) (readmodel.Page, error)
	// AttemptResponses reads what each attempt of a delivery got back,
	// from the log, by attempt id.
	// Only the attempts named are read (all when none is); the bodies read
	// at once are bounded (projections.MaxAttemptResponseBytes), and the
	// log read by the answer's budget in ctx (readmodel.LogBudget).
	AttemptResponses(ctx context.Context, deliveryID string, maxBody int64, only ...string) (map[string]readmodel.AttemptResponse, error)
	// AttemptEditBody reads the body an edited retry sent instead of the
	// recorded one (ok false: it sent the recorded body).
	AttemptEditBody(ctx context.Context, deliveryID, attemptID string) (body []byte, ok bool, err error)
	// SearchDeliveries is a page of the deliveries that match a filter,
	// with what only the log holds when payload is set.
	SearchDeliveries(ctx context.Context, address string, first int, after string, f readmodel.DeliveryFilter, payload bool) (readmodel.Page, error)

	// Watch streams the changes to an address's deliveries until its stop
	// function is called; ChangedSince lists what changed after a cursor,
	// for a subscriber that resumes.
	Watch(address string) (<-chan readmodel.Change, func())
	ChangedSince(ctx context.Context, address, since string) ([]string, error)

	// Tokens lists an account's unrevoked tokens; WatchToken's channel
	// closes once the views apply the token's revocation.
	Tokens(ctx context.Context, accountID string) ([]readmodel.Token, error)
	WatchToken(tokenID string) (<-chan struct{}, func())
	// OpenInvites counts an account's unused, unexpired sign-up invites
	// and tells when the first of them expires.
	OpenInvites(ctx context.Context, createdBy string, now time.Time) (int, time.Time, error)

	// Members lists an account's current members, Member reads one;
	// Activity lists changes to the account, newest first.
	Members(ctx context.Context, accountID string) ([]readmodel.Member, error)
	Member(ctx context.Context, accountID, memberID string) (readmodel.Member, error)
	Activity(ctx context.Context, accountID string, before uint64, limit int) ([]readmodel.Activity, error)

	// Stats sums an address's per-minute rollup over a range ending with
	// the minute holding now (offline time too for an Endpoint, from since).
	Stats(ctx context.Context, address string, r readmodel.StatsRange, now time.Time, endpoint bool, since time.Time) (readmodel.Stats, error)

	// AccountEvents locates an account's events in the log.
	AccountEvents(ctx context.Context, accountID string, after uint64, limit int) ([]readmodel.EventRef, error)

	// The agent sessions that explanations name (Delivery.explanation).
	explain.Sessions
}
