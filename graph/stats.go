package graph

import (
	"context"
	"time"

	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/readmodel"
)

// statsCost is what a stats field weighs on top of what it selects: it
// reads its 60 buckets whatever it selects (up to a week of one address's
// per-minute rollup rows, 10 080, and for an Endpoint its agent sessions
// in the range: 14 ms of a core for a week, BenchmarkStatsWeek), so its
// weight cannot follow the selection, or a minimal one (51 points) let
// an operation read 80 weeks through aliases, or every Endpoint of an
// account through endpoints. At 850, an operation holds at most 11.
const statsCost = 850

// stats reads an address's series; endpoint tells to add offline time,
// counted from since.
func (r *Resolver) stats(ctx context.Context, address string, rng *model.StatsRange, endpoint bool, since time.Time) (*model.Stats, error) {
	want := readmodel.StatsHour
	if rng != nil {
		want = readmodel.StatsRange(*rng)
	}
	st, err := r.Views.Stats(ctx, address, want, r.now(), endpoint, since)
	if err != nil {
		return nil, err
	}
	out := &model.Stats{Range: model.StatsRange(st.Range), BucketSeconds: int(st.BucketWidth / time.Second),
		From: st.From, To: st.To, Totals: toStatsBucket(st.Totals), Buckets: make([]*model.StatsBucket, len(st.Buckets))}
	for i, b := range st.Buckets {
		out.Buckets[i] = toStatsBucket(b)
	}
	return out, nil
}

func toStatsBucket(b readmodel.StatsBucket) *model.StatsBucket {
	return &model.StatsBucket{Start: b.Start, Deliveries: int(b.Deliveries),
		Status2xx: int(b.Status[2]), Status3xx: int(b.Status[3]), Status4xx: int(b.Status[4]), Status5xx: int(b.Status[5]),
		Pending: int(b.Pending), Filtered: int(b.Filtered), Refused: int(b.Refused), Answers: int(b.Answers),
		P50Ms: intPtr(b.P50Ms), P95Ms: intPtr(b.P95Ms), OfflineSeconds: intPtr(b.OfflineSeconds)}
}

func intPtr(p *int64) *int {
	if p == nil {
		return nil
	}
	n := int(*p)
	return &n
}
