package graph

import (
	"context"
	"sort"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/readmodel"
)

// Bounds of accountsUsage's list: 20 when first is absent, at most
// maxUsageFirst (each row is a point read of the accounts view).
const (
	defaultUsageFirst = 20
	maxUsageFirst     = 500
)

// QuotaViews is what the quota resolvers read of the views.
type QuotaViews interface {
	commands.QuotaViews
	// AccountQuota is an account's quota override, read (from memory,
	// mostly) on every operation for its API cost budget.
	AccountQuota(ctx context.Context, id string) (readmodel.AccountUsage, error)
}

func (r *Resolver) usageOf(ctx context.Context, accountID string) (*model.AccountUsage, error) {
	u, err := r.Service.AccountUsage(ctx, r.Quotas, accountID)
	if err != nil {
		return nil, err
	}
	return r.usageModel(u), nil
}

func (r *Resolver) usageModel(u commands.Usage) *model.AccountUsage {
	m := &model.AccountUsage{
		AccountID: u.AccountID, Name: u.Name, StoredBytes: int(u.StoredBytes),
		StorageOverride: u.StorageQuota != domain.QuotaDefault, RateOverride: u.RateQuota != "", APICostOverride: u.APICostQuota != "",
		Deliveries: int(u.Deliveries), DeliveriesLastDay: int(u.DeliveriesWindow),
		Refusals: []*model.QuotaRefusals{},
	}
	if u.Storage > 0 {
		n := int(u.Storage)
		m.StorageQuota = &n
	}
	if !u.Rate.Off() {
		s := u.Rate.String()
		m.Rate = &s
	}
	if !u.APICost.Off() {
		s := u.APICost.String()
		m.APICost = &s
	}
	if r.QuotaRefusals != nil {
		counts := r.QuotaRefusals(u.AccountID)
		reasons := make([]string, 0, len(counts))
		for reason := range counts {
			reasons = append(reasons, reason)
		}
		sort.Strings(reasons)
		for _, reason := range reasons {
			m.Refusals = append(m.Refusals, &model.QuotaRefusals{Reason: reason, Count: int(counts[reason])})
		}
	}
	return m
}

func (r *accountResolver) accountUsage(ctx context.Context, obj *model.Account) (*model.AccountUsage, error) {
	acc, err := r.account(ctx)
	if err != nil {
		return nil, err
	}
	if acc.ID != obj.ID {
		return nil, domain.ErrNotFound
	}
	return r.usageOf(ctx, obj.ID)
}

func (r *mutationResolver) setAccountQuota(ctx context.Context, account string, storage, rate, apiCost *string) (*model.AccountUsage, error) {
	if !r.isAdmin(ctx) {
		return nil, domain.ErrUnauthenticated
	}
	if err := r.Service.SetAccountQuota(ctx, account, storage, rate, apiCost); err != nil {
		return nil, err
	}
	return r.usageOf(ctx, account)
}

func (r *queryResolver) accountsUsage(ctx context.Context, account *string, first *int) ([]*model.AccountUsage, error) {
	if !r.isAdmin(ctx) {
		return nil, domain.ErrUnauthenticated
	}
	if account != nil {
		u, err := r.usageOf(ctx, *account)
		if err != nil {
			return nil, err
		}
		return []*model.AccountUsage{u}, nil
	}
	n := defaultUsageFirst
	if first != nil {
		if *first < 1 || *first > maxUsageFirst {
			return nil, &domain.InvalidInputError{Field: "first", Reason: "must be 1 to 500"}
		}
		n = *first
	}
	top, err := r.Service.TopUsage(ctx, r.Quotas, n)
	if err != nil {
		return nil, err
	}
	out := make([]*model.AccountUsage, 0, len(top))
	for _, u := range top {
		out = append(out, r.usageModel(u))
	}
	return out, nil
}
