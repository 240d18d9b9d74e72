package commands

import (
	"context"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Views is what the service reads of the read models: how far they have
// applied the log (a command waits for its own write), and the rows a
// command returns or decides on. The composition root passes the
// projections; tests may pass anything that keeps these promises.
type Views interface {
	// WaitFor returns once the views have applied position, or ctx's error.
	WaitFor(ctx context.Context, position uint64) error
	// Health says where the views are and why they are stuck, if they are.
	Health() readmodel.Health

	Inspector(ctx context.Context, id string) (readmodel.Inspector, error)
	Endpoint(ctx context.Context, id string) (readmodel.Endpoint, error)
	Account(ctx context.Context, id string) (readmodel.Account, error)
	// CountEndpoints counts an account's Endpoints that are not deleted.
	CountEndpoints(ctx context.Context, accountID string) (int, error)
	// EndpointNamed returns the id of an account's Endpoint named name
	// that is not deleted, "" when there is none.
	EndpointNamed(ctx context.Context, accountID, name string) (string, error)
	AccountByTokenHash(ctx context.Context, hash string) (readmodel.Account, error)
	// TokenByHash returns an unrevoked token (expired or not) and its account.
	TokenByHash(ctx context.Context, hash string) (readmodel.Account, readmodel.Token, error)
	Tokens(ctx context.Context, accountID string) ([]readmodel.Token, error)
	// DeviceByHash finds the newest device code by the hash of its device
	// code, or of its user code when byUser.
	DeviceByHash(ctx context.Context, hash string, byUser bool) (readmodel.DeviceCode, error)
	// InviteByHash finds an invite's id by the hash of its code.
	InviteByHash(ctx context.Context, hash string) (string, error)
	// OpenInvites counts an account's unused, unexpired sign-up invites
	// and tells when the first of them expires.
	OpenInvites(ctx context.Context, createdBy string, now time.Time) (int, time.Time, error)
	// MemberByLogin finds a current member by login key (domain.LoginKey);
	// Member a current member of an account.
	MemberByLogin(ctx context.Context, key string) (readmodel.Member, error)
	Member(ctx context.Context, accountID, memberID string) (readmodel.Member, error)
	// MemberInviteByHash finds a member invite by its code's hash.
	MemberInviteByHash(ctx context.Context, hash string) (readmodel.MemberInvite, error)
	// Delivery reads a delivery with its headers and bodies;
	// DeliverySummary without them.
	Delivery(ctx context.Context, id string) (readmodel.Delivery, error)
	DeliverySummary(ctx context.Context, id string) (readmodel.Delivery, error)

	// PurgeCandidates and PurgedDeliveries feed the retention sweep.
	PurgeCandidates(ctx context.Context, now time.Time, retention time.Duration, limit int) ([]readmodel.PurgeCandidate, error)
	PurgedDeliveries(ctx context.Context, limit int) ([]string, error)
	// RetentionCandidates and RetainedDeliveries feed the Endpoints' one.
	RetentionCandidates(ctx context.Context, now time.Time, limits domain.RetentionLimits, after string, limit int) ([]readmodel.RetentionCandidate, error)
	RetainedDeliveries(ctx context.Context, after string, limit int) (ids []string, last string, err error)
}
