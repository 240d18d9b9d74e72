package projections

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// The stats rollup: one row per address per minute (stats_minutes) with
// what charts show, kept by the history writer as deliveries and outcomes
// arrive, so a week's series sums at most statsKeepMinutes rows of one
// address instead of scanning its deliveries. Latencies go into a fixed
// histogram per minute (statsLatencyBoundsMs); percentiles come from it.

// statsLatencyBoundsMs are the upper bounds (inclusive, milliseconds) of
// the latency histogram's buckets; one more bucket holds everything slower.
var statsLatencyBoundsMs = []int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000}

// statsHistBuckets is how many latency columns a minute has (h0...).
var statsHistBuckets = len(statsLatencyBoundsMs) + 1

// statsKeepMinutes is how far behind the newest event a minute is kept: a
// week, the longest range read, and an hour of slack for the current
// bucket and clocks that disagree.
const statsKeepMinutes = 7*24*60 + 60

// statsMaxSessions bounds the agent sessions one read looks at to tell
// time with no listener connected: the open ones first, then those that
// ended earliest in the range; past it the rest of the range counts as
// offline, which a reconnect storm of that size is close enough to.
const statsMaxSessions = 5000

var statsSchemaSQL = `
-- minute is Unix minutes of the event's occurred-at time. c1..c5 count the
-- deliveries received that minute by the status class they are counted
-- under (deliveries.stats_class); received - (c1+..+c5) had no answer yet.
-- h0.. are the latency histogram of the local answers that came that
-- minute (statsLatencyBoundsMs).
CREATE TABLE IF NOT EXISTS stats_minutes (
	address  TEXT    NOT NULL,
	minute   INTEGER NOT NULL,
` + statsColumnDefs() + `
	PRIMARY KEY (address, minute)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS stats_minutes_by_minute ON stats_minutes (minute);

-- at: the latest occurred-at time of any event applied (Unix nanoseconds):
-- minutes more than statsKeepMinutes older are pruned and take no more
-- counts, which depends on the log alone, never on the wall clock.
CREATE TABLE IF NOT EXISTS stats_horizon (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	at INTEGER NOT NULL
);
INSERT OR IGNORE INTO stats_horizon (id, at) VALUES (1, 0);
`

// statsCounters names the counter columns of stats_minutes in order.
func statsCounters() []string {
	cols := []string{"received", "c1", "c2", "c3", "c4", "c5", "filtered", "refused"}
	for i := range statsHistBuckets {
		cols = append(cols, fmt.Sprintf("h%d", i))
	}
	return cols
}

func statsColumnDefs() string {
	var b strings.Builder
	for _, c := range statsCounters() {
		fmt.Fprintf(&b, "\t%s INTEGER NOT NULL DEFAULT 0,\n", c)
	}
	return b.String()
}

// statsCounter indexes a counter in a statsDelta (statsCounters' order).
const (
	sReceived = 0
	sClass0   = 0 // sClass0 + class (1..5) is that class's counter
	sFiltered = 6
	sRefused  = 7
	sHist0    = 8
)

var (
	qStatsUpsert = func() string {
		cols := statsCounters()
		marks := make([]string, len(cols))
		sets := make([]string, len(cols))
		for i, c := range cols {
			marks[i] = "?"
			sets[i] = fmt.Sprintf("%s = %s + excluded.%s", c, c, c)
		}
		return "INSERT INTO stats_minutes (address, minute, " + strings.Join(cols, ", ") + ") VALUES (?, ?, " +
			strings.Join(marks, ", ") + ") ON CONFLICT (address, minute) DO UPDATE SET " + strings.Join(sets, ", ")
	}()
	// qStatsDropEmpty removes a minute whose counts went back to zero (a
	// deleted delivery's): a rebuild, which never sees the delivery, has no
	// row there either.
	qStatsDropEmpty = func() string {
		return "DELETE FROM stats_minutes WHERE address = ? AND minute = ? AND " +
			strings.Join(statsCounters(), " = 0 AND ") + " = 0"
	}()
	qStatsPrune      = `DELETE FROM stats_minutes WHERE minute < ?`
	qStatsHorizon    = `SELECT at FROM stats_horizon WHERE id = 1`
	qStatsHorizonSet = `UPDATE stats_horizon SET at = ? WHERE id = 1`
	// qStatsClassesSet sets the class of n deliveries, given as (position,
	// class) pairs, by n in chunks: one statement for a batch's deliveries.
	qStatsClassesSet = byChunk(func(n int) string {
		return `UPDATE deliveries SET stats_class = v.column2 FROM (VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?), ", n), ", ") + `) AS v WHERE deliveries.position = v.column1`
	})
	qStatsDelivery = `SELECT ` + statsReturning + ` FROM deliveries WHERE position = ?`

	qStatsDeliveryByID = `SELECT position, address, received_at, stats_class, answered_reason FROM deliveries WHERE id = ?`
	qStatsAnswers      = `SELECT outcome_at, duration_ms FROM attempts WHERE delivery_position = ?
		AND copy = 0 AND error = '' AND status IS NOT NULL AND duration_ms IS NOT NULL AND outcome_at IS NOT NULL`

	// The refusals of an address not yet counted by its row (see
	// qInspectorRefused): applied again, they are not counted twice.
	qStatsRefusedNew = `SELECT 1 FROM inspectors WHERE id = ?1 AND refused_position < ?2
		UNION ALL SELECT 1 FROM endpoints WHERE id = ?1 AND refused_position < ?2`
)

var statsWriteQueries = []string{qStatsRefusedNew, qStatsUpsert, qStatsDropEmpty, qStatsPrune, qStatsHorizon, qStatsHorizonSet,
	qStatsDelivery, qStatsDeliveryByID, qStatsAnswers}

// statsKey is one address's minute.
type statsKey struct {
	address string
	minute  int64
}

// statsDelta is what a batch adds to one minute (statsCounters' order).
type statsDelta []int64

// statsWriter gathers a batch's changes to the rollup in memory and writes
// each minute once, at flush. The history writer feeds it.
type statsWriter struct {
	loaded  bool
	horizon int64 // latest event time seen (Unix nanoseconds)
	stored  int64 // horizon as stats_horizon holds it
	deltas  map[statsKey]statsDelta
	order   []statsKey
	// classes are the (position, class) pairs counted sets, written by
	// flush many to a statement (qStatsClassesSet).
	classes [][]any
}

// newStatsWriter starts from the horizon the last committed batch stored,
// when known: it is read from the table otherwise.
func newStatsWriter(h statsHorizon) *statsWriter {
	return &statsWriter{deltas: map[statsKey]statsDelta{}, loaded: h.known, horizon: h.at, stored: h.at}
}

func unixMinute(nanos int64) int64 { return nanos / int64(time.Minute) }

// see moves the horizon to the current event.
func (s *statsWriter) see(t *txn) error {
	if !s.loaded {
		row, err := t.queryRow(qStatsHorizon)
		if err != nil {
			return err
		}
		if err := row.Scan(&s.horizon); err != nil {
			return fmt.Errorf("read stats horizon: %w", err)
		}
		s.stored, s.loaded = s.horizon, true
	}
	if at := t.at(); at > s.horizon {
		s.horizon = at
	}
	return nil
}

// add adds n to counter i of address's minute holding the time at.
func (s *statsWriter) add(address string, at int64, i int, n int64) {
	k := statsKey{address, unixMinute(at)}
	d, ok := s.deltas[k]
	if !ok {
		d = make(statsDelta, len(statsCounters()))
		s.deltas[k] = d
		s.order = append(s.order, k)
	}
	d[i] += n
}

// refused counts an address's refusals unless its row counted them already.
func (s *statsWriter) refused(t *txn, p domain.AddressRateLimited) error {
	row, err := t.queryRow(qStatsRefusedNew, p.Address, t.pos())
	if err != nil {
		return err
	}
	var one int
	if err := row.Scan(&one); errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return fmt.Errorf("refusals of %s for stats: %w", p.Address, err)
	}
	s.add(p.Address, t.at(), sRefused, p.Refused)
	return nil
}

// latency counts a local answer of ms milliseconds.
func (s *statsWriter) latency(address string, at, ms int64) {
	s.add(address, at, sHist0+latencyBucket(ms), 1)
}

func latencyBucket(ms int64) int {
	for i, b := range statsLatencyBoundsMs {
		if ms <= b {
			return i
		}
	}
	return len(statsLatencyBoundsMs)
}

// statusClass is the class of an answered status (1 to 5), 0 for none.
func statusClass(status sql.NullInt64) int64 {
	if !status.Valid || status.Int64 < 100 || status.Int64 > 599 {
		return 0
	}
	return status.Int64 / 100
}

// receipt counts a delivery its DeliveryReceived just created, under the
// class it was answered at receipt (0: none yet), as its row's
// stats_class says.
func (s *statsWriter) receipt(address string, at, class int64, reason string) {
	s.add(address, at, sReceived, 1)
	if strings.HasPrefix(reason, domain.ReasonFiltered) {
		s.add(address, at, sFiltered, 1)
	}
	if class > 0 {
		s.add(address, at, sClass0+int(class), 1)
	}
}

// counted counts a delivery, by its row, under the class its status has
// now: the first time it adds it to its minute, later it moves it from the
// class it was counted under. Run at flush, once per delivery the batch
// touched, after its row is final for the batch.
//
// cur is the row as its last update in the batch returned it, or nil: it
// is then read.
func (s *statsWriter) counted(t *txn, dpos int64, cur *statsRow) error {
	if cur == nil {
		row, err := t.queryRow(qStatsDelivery, dpos)
		if err != nil {
			return err
		}
		cur = &statsRow{}
		if err := cur.scan(row); err != nil {
			return fmt.Errorf("read delivery at %d for stats: %w", dpos, err)
		}
	}
	address, received, status, was, reason := cur.address, cur.received, cur.status, cur.was, cur.reason
	class := statusClass(status)
	if was.Valid && was.Int64 == class {
		return nil
	}
	if !was.Valid {
		s.add(address, received, sReceived, 1)
		if strings.HasPrefix(reason, domain.ReasonFiltered) {
			s.add(address, received, sFiltered, 1)
		}
		if class > 0 {
			s.add(address, received, sClass0+int(class), 1)
		}
	} else {
		s.move(address, received, was.Int64, class)
	}
	s.classes = append(s.classes, []any{dpos, class})
	return nil
}

// moved moves a counted delivery of address received at received from the
// class was to the class of status, which it returns for its row.
func (s *statsWriter) moved(address string, received, was int64, status any) int64 {
	var st sql.NullInt64
	switch v := status.(type) {
	case int:
		st = sql.NullInt64{Int64: int64(v), Valid: true}
	case int64:
		st = sql.NullInt64{Int64: v, Valid: true}
	}
	class := statusClass(st)
	s.move(address, received, was, class)
	return class
}

// move moves a counted delivery from the class was to class (0: none).
func (s *statsWriter) move(address string, received, was, class int64) {
	if was == class {
		return
	}
	if was > 0 {
		s.add(address, received, sClass0+int(was), -1)
	}
	if class > 0 {
		s.add(address, received, sClass0+int(class), 1)
	}
}

// dropped takes a delivery about to be deleted off the rollup: what it was
// counted under and its local answers' latencies. Run before its row and
// attempts are deleted.
func (s *statsWriter) dropped(t *txn, id string) error {
	row, err := t.queryRow(qStatsDeliveryByID, id)
	if err != nil {
		return err
	}
	var (
		dpos, received int64
		address        string
		was            sql.NullInt64
		reason         string
	)
	if err := row.Scan(&dpos, &address, &received, &was, &reason); errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read delivery %s for stats: %w", id, err)
	}
	if was.Valid {
		s.add(address, received, sReceived, -1)
		if strings.HasPrefix(reason, domain.ReasonFiltered) {
			s.add(address, received, sFiltered, -1)
		}
		if was.Int64 > 0 {
			s.add(address, received, sClass0+int(was.Int64), -1)
		}
	}
	st, err := t.stmt(qStatsAnswers)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(t.ctx, dpos)
	if err != nil {
		return fmt.Errorf("read answers of delivery %s for stats: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var at, ms int64
		if err := rows.Scan(&at, &ms); err != nil {
			return fmt.Errorf("read answers of delivery %s for stats: %w", id, err)
		}
		s.add(address, at, sHist0+latencyBucket(ms), -1)
	}
	return rows.Err()
}

// flush writes the batch's minutes, skipping those older than the horizon
// keeps, prunes the minutes the horizon left behind and stores it. Which
// minutes are kept depends only on the newest event time, so a rebuild,
// which splits the log into other batches, ends with the same rows.
func (s *statsWriter) flush(t *txn) error {
	if _, err := execChunks(t, qStatsClassesSet, s.classes); err != nil {
		return fmt.Errorf("set the stats class of %d deliveries: %w", len(s.classes), err)
	}
	s.classes = nil
	if !s.loaded {
		return nil // the batch applied nothing
	}
	cutoff := unixMinute(s.horizon) - statsKeepMinutes
	for _, k := range s.order {
		d := s.deltas[k]
		if k.minute < cutoff {
			continue
		}
		negative, zero := false, true
		for _, n := range d {
			negative = negative || n < 0
			zero = zero && n == 0
		}
		if zero {
			continue
		}
		args := make([]any, 0, 2+len(d))
		args = append(args, k.address, k.minute)
		for _, n := range d {
			args = append(args, n)
		}
		if _, err := t.exec(qStatsUpsert, args...); err != nil {
			return fmt.Errorf("store stats of %s at minute %d: %w", k.address, k.minute, err)
		}
		if negative {
			if _, err := t.exec(qStatsDropEmpty, k.address, k.minute); err != nil {
				return fmt.Errorf("drop empty stats of %s at minute %d: %w", k.address, k.minute, err)
			}
		}
	}
	s.deltas, s.order = map[statsKey]statsDelta{}, nil
	if s.horizon == s.stored {
		return nil
	}
	if unixMinute(s.horizon) != unixMinute(s.stored) {
		if _, err := t.exec(qStatsPrune, cutoff); err != nil {
			return fmt.Errorf("prune stats before minute %d: %w", cutoff, err)
		}
	}
	if _, err := t.exec(qStatsHorizonSet, s.horizon); err != nil {
		return fmt.Errorf("store stats horizon: %w", err)
	}
	s.stored = s.horizon
	return nil
}

// Stats reads address's series over r ending with the minute holding now:
// readmodel.StatsBuckets buckets summed from its rollup rows. since is when
// the address could first have had a listener (an Endpoint's creation);
// offline time is read only when endpoint is true.
func (v *History) Stats(ctx context.Context, address string, r readmodel.StatsRange, now time.Time, endpoint bool, since time.Time) (readmodel.Stats, error) {
	width, ok := r.BucketWidth()
	if !ok {
		return readmodel.Stats{}, fmt.Errorf("stats of %s: unknown range %q", address, r)
	}
	wm := int64(width / time.Minute)
	end := unixMinute(now.UnixNano()) + 1
	start := end - wm*readmodel.StatsBuckets
	st := readmodel.Stats{Range: r, BucketWidth: width,
		From: time.Unix(start*60, 0).UTC(), To: time.Unix(end*60, 0).UTC(),
		Buckets: make([]readmodel.StatsBucket, readmodel.StatsBuckets)}
	hists := make([][]int64, readmodel.StatsBuckets)
	for i := range st.Buckets {
		st.Buckets[i].Start = st.From.Add(time.Duration(i) * width)
		hists[i] = make([]int64, statsHistBuckets)
	}
	// One sum per bucket, each over a range of the primary key: a single
	// GROUP BY on the bucket sorted the rows in a temporary b-tree first,
	// and summing in Go converted every value (a week: 31 and 119 ms
	// against 9 ms, BenchmarkStatsWeek).
	cols := statsCounters()
	sums := make([]string, len(cols))
	for i, c := range cols {
		sums[i] = "COALESCE(SUM(" + c + "), 0)"
	}
	// The buckets' sums are read on one connection, in one transaction.
	tx, err := v.r.BeginTx(ctx, nil)
	if err != nil {
		return readmodel.Stats{}, fmt.Errorf("stats of %s: %w", address, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	stmt, err := tx.PrepareContext(ctx, "SELECT "+strings.Join(sums, ", ")+
		" FROM stats_minutes NOT INDEXED WHERE address = ?1 AND minute >= ?2 AND minute < ?3")
	if err != nil {
		return readmodel.Stats{}, fmt.Errorf("stats of %s: %w", address, err)
	}
	defer stmt.Close()
	vals := make([]int64, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for b := range st.Buckets {
		from := start + int64(b)*wm
		if err := stmt.QueryRowContext(ctx, address, from, from+wm).Scan(ptrs...); err != nil {
			return readmodel.Stats{}, fmt.Errorf("stats of %s: %w", address, err)
		}
		bk := &st.Buckets[b]
		bk.Deliveries = vals[sReceived]
		copy(bk.Status[1:], vals[sClass0+1:sClass0+6])
		bk.Filtered, bk.Refused = vals[sFiltered], vals[sRefused]
		copy(hists[b], vals[sHist0:])
	}
	// Ended before offline reads: a read never holds two connections.
	_ = tx.Rollback()
	total := make([]int64, statsHistBuckets)
	for i := range st.Buckets {
		bk := &st.Buckets[i]
		finishBucket(bk, hists[i])
		st.Totals.Deliveries += bk.Deliveries
		for c := range bk.Status {
			st.Totals.Status[c] += bk.Status[c]
		}
		st.Totals.Filtered += bk.Filtered
		st.Totals.Refused += bk.Refused
		for j, n := range hists[i] {
			total[j] += n
		}
	}
	st.Totals.Start = st.From
	finishBucket(&st.Totals, total)
	if endpoint {
		if err := v.offline(ctx, address, &st, now, since); err != nil {
			return readmodel.Stats{}, err
		}
	}
	return st, nil
}

// finishBucket sets what follows from a bucket's counts and histogram.
func finishBucket(bk *readmodel.StatsBucket, hist []int64) {
	answered := int64(0)
	for c := 1; c <= 5; c++ {
		answered += bk.Status[c]
	}
	bk.Pending = bk.Deliveries - answered
	for _, n := range hist {
		bk.Answers += n
	}
	bk.P50Ms = percentile(hist, bk.Answers, 50)
	bk.P95Ms = percentile(hist, bk.Answers, 95)
}

// percentile is the upper bound of the histogram bucket holding the p-th
// percentile of n samples (the last bound for the open-ended bucket), nil
// without samples.
func percentile(hist []int64, n int64, p int64) *int64 {
	if n == 0 {
		return nil
	}
	rank := (n*p + 99) / 100 // the ceil(n·p/100)-th smallest sample
	var seen int64
	for i, c := range hist {
		seen += c
		if seen >= rank {
			ms := statsLatencyBoundsMs[min(i, len(statsLatencyBoundsMs)-1)]
			return &ms
		}
	}
	ms := statsLatencyBoundsMs[len(statsLatencyBoundsMs)-1]
	return &ms
}

// offline sets each bucket's time with no agent session of the Endpoint
// connected, from the sessions open now and those that ended in the range
// (at most statsMaxSessions, the open ones first), counting only from
// since and up to now.
func (v *History) offline(ctx context.Context, endpointID string, st *readmodel.Stats, now, since time.Time) error {
	from, to := st.From.UnixNano(), st.To.UnixNano()
	type span struct{ a, b int64 }
	var sessions []span
	for _, q := range statsSessionQueries {
		rows, err := v.r.QueryContext(ctx, q, endpointID, from, to, statsMaxSessions-len(sessions))
		if err != nil {
			return fmt.Errorf("sessions of %s for stats: %w", endpointID, err)
		}
		for rows.Next() {
			var s span
			if err := rows.Scan(&s.a, &s.b); err != nil {
				rows.Close()
				return fmt.Errorf("sessions of %s for stats: %w", endpointID, err)
			}
			sessions = append(sessions, s)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("sessions of %s for stats: %w", endpointID, err)
		}
	}
	slices.SortFunc(sessions, func(x, y span) int { return cmp.Compare(x.a, y.a) })
	var online []span // merged, in order
	for _, s := range sessions {
		if n := len(online); n > 0 && s.a <= online[n-1].b {
			online[n-1].b = max(online[n-1].b, s.b)
			continue
		}
		online = append(online, s)
	}
	width := st.BucketWidth.Nanoseconds()
	var total int64
	for i := range st.Buckets {
		a := max(from+int64(i)*width, since.UnixNano())
		b := min(from+int64(i+1)*width, now.UnixNano())
		off := int64(0)
		if b > a {
			off = b - a
			for _, s := range online {
				off -= max(0, min(b, s.b)-max(a, s.a))
			}
		}
		sec := off / int64(time.Second)
		st.Buckets[i].OfflineSeconds = &sec
		total += sec
	}
	st.Totals.OfflineSeconds = &total
	return nil
}

// statsSessionQueries read the sessions that overlap a range (?2, ?3) of
// an Endpoint (?1), at most ?4: those open now, then those that ended in
// the range, earliest end first. Each walks an index range of the rows it
// keeps (agent_sessions_by_end, named: without statistics the planner took
// the index by start for the open ones), so a read follows the sessions of
// its range, never the Endpoint's whole history, which the views keep for
// good: reading them by their start walked every session that ended
// before the range (200 000 of them: 46 ms of CPU a read), and past
// statsMaxSessions a storm of short sessions hid the one still open.
var statsSessionQueries = []string{
	`SELECT connected_at, ?3 FROM agent_sessions INDEXED BY agent_sessions_by_end
		WHERE endpoint_id = ?1 AND disconnected_at IS NULL AND connected_at < ?3 LIMIT ?4`,
	`SELECT connected_at, disconnected_at FROM agent_sessions INDEXED BY agent_sessions_by_end
		WHERE endpoint_id = ?1 AND disconnected_at > ?2 AND connected_at < ?3 ORDER BY disconnected_at LIMIT ?4`,
}

// statsReturning are the columns a delivery is counted by, as
// statsRow.scan reads them.
const statsReturning = `address, received_at, response_status, stats_class, answered_reason`

// statsRow is what the rollup counts a delivery by (statsReturning).
type statsRow struct {
	address     string
	received    int64
	status, was sql.NullInt64 // its status now, and the class it was counted under
	reason      string
}

// scan reads the statsReturning columns, after the columns in first.
func (r *statsRow) scan(row *sql.Row, first ...any) error {
	return row.Scan(append(first, &r.address, &r.received, &r.status, &r.was, &r.reason)...)
}
