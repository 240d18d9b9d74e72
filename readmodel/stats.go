package readmodel

import "time"

// StatsRange is a window a chart shows: the last hour, day or week.
type StatsRange string

// The ranges stats are read over.
const (
	StatsHour StatsRange = "HOUR"
	StatsDay  StatsRange = "DAY"
	StatsWeek StatsRange = "WEEK"
)

// StatsBuckets is how many buckets every range has, so a read costs the
// same whatever the range: 60 one-minute buckets for an hour, 60 of 24
// minutes for a day, 60 of 168 minutes for a week.
const StatsBuckets = 60

// BucketWidth is how long one bucket of r lasts; ok is false for an
// unknown range.
func (r StatsRange) BucketWidth() (width time.Duration, ok bool) {
	switch r {
	case StatsHour:
		return time.Minute, true
	case StatsDay:
		return 24 * time.Minute, true
	case StatsWeek:
		return 168 * time.Minute, true
	}
	return 0, false
}

// StatsBucket is what an address received in one bucket of time (or in a
// whole range, for the totals). Deliveries are counted in the bucket they
// were received in, by the status class their sender got (as history
// filters by it); latencies in the bucket their local answer came in.
type StatsBucket struct {
	Start time.Time
	// Deliveries received; Status[1..5] those answered 1xx..5xx, Pending
	// those not answered yet.
	Deliveries int64
	Status     [6]int64
	Pending    int64
	// Filtered: answered at receipt because no listener's filters matched.
	Filtered int64
	// Refused: requests the address's rate limit refused (not deliveries).
	Refused int64
	// Answers: local answers timed; P50Ms and P95Ms their percentiles, the
	// upper bound of the latency bucket holding them (nil without answers).
	Answers int64
	P50Ms   *int64
	P95Ms   *int64
	// OfflineSeconds: time in the bucket with no agent session connected
	// (Endpoints only, counted from the Endpoint's creation; nil for inspectors).
	OfflineSeconds *int64
}

// Stats is an address's series over a range.
type Stats struct {
	Range       StatsRange
	BucketWidth time.Duration
	From, To    time.Time
	Buckets     []StatsBucket // StatsBuckets of them, oldest first
	Totals      StatsBucket
}
