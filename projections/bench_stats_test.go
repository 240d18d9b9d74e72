package projections

import (
	"testing"
	"time"

	"github.com/relayhq/relay/readmodel"
)

// BenchmarkStatsWeek reads a week's series (60 buckets of 168 minutes) of
// an Endpoint that received 1 000 000 deliveries that week, beside 20
// other addresses as busy. Applying a million deliveries through the
// views would take minutes, so the rollup rows those deliveries make are
// written directly: one per address per minute, 10 080 each, counts
// summing to 1 000 000 per address (99 or 100 a minute, a tenth 5xx, a
// latency histogram per minute). The read sums one address's rows, never
// its deliveries, so its cost does not depend on how many there were.
func BenchmarkStatsWeek(b *testing.B) {
	s := newSynth(b, []byte("{}"))
	v := s.open("views.db")
	ctx := b.Context()
	const (
		addresses   = 21
		deliveries  = 1_000_000
		weekMinutes = 7 * 24 * 60
	)
	now := time.Date(2026, 3, 8, 12, 0, 0, 0, time.UTC)
	end := unixMinute(now.UnixNano()) + 1
	tx, err := v.w.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, qStatsUpsert)
	if err != nil {
		b.Fatal(err)
	}
	args := make([]any, 2+len(statsCounters()))
	for a := range addresses {
		address := "ep-bench"
		if a > 0 {
			address = "other-" + string(rune('a'+a))
		}
		for m := range int64(weekMinutes) {
			n := int64(deliveries / weekMinutes)
			if m < deliveries%weekMinutes {
				n++
			}
			for i := range args {
				args[i] = int64(0)
			}
			args[0], args[1] = address, end-weekMinutes+m
			args[2+sReceived] = n
			args[2+sClass0+2] = n - n/10
			args[2+sClass0+5] = n / 10
			args[2+sHist0+3] = n / 2
			args[2+sHist0+6] = n - n/2
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, r := range []readmodel.StatsRange{readmodel.StatsHour, readmodel.StatsDay, readmodel.StatsWeek} {
		b.Run(string(r), func(b *testing.B) {
			for b.Loop() {
				st, err := v.Stats(ctx, "ep-bench", r, now, false, time.Time{})
				if err != nil {
					b.Fatal(err)
				}
				if r == readmodel.StatsWeek && st.Totals.Deliveries != deliveries {
					b.Fatalf("week: %d deliveries, want %d", st.Totals.Deliveries, deliveries)
				}
			}
		})
	}
}
