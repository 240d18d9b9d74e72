package projections

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/time/rate"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/readmodel"
)

// History is the read model of delivery history: deliveries with their
// attempts and responses, the headers and bodies read back from the log,
// and the watch hub that tells live subscribers what a batch changed. The
// runner writes its tables; History only reads them.
type History struct {
	r       *readPool  // the runner's reader pool
	sr      *sql.DB    // the runner's search pool (see searchConns)
	rs      *readStmts // the runner's hot reads
	store   domain.EventStore
	codec   *domain.Codec
	backlog int // see Options.WatchBacklog
	// srShares is each searcher's share of sr (see searchTx).
	srShares clientkey.Shares
	// logShares is each reader's share of the log's reads (readStream).
	logShares clientkey.Shares
	// searchBytes bounds the log a filtered page reads (see
	// Options.SearchLogBytes).
	searchBytes int64
	// searchPace bounds how fast all searches read the log (see
	// Options.SearchLogRate).
	searchPace *rate.Limiter
	hub        hub
	// horizon is stats_horizon as the last committed batch left it, so a
	// batch need not read it (only the writer, under writeMu, uses it).
	horizon statsHorizon
}

// statsHorizon is a copy of stats_horizon.at; known is false until a batch
// has read or written it.
type statsHorizon struct {
	at    int64
	known bool
}

// MaxCountedDuplicates bounds Delivery.Duplicates: a row's other
// deliveries with its provider delivery id are counted up to there. A
// provider sends an id again a handful of times; counting every one made
// each row of a page cost as much as the sender had repeated it (a page of
// 100 rows of an id sent 100 000 times took 0.6 s of a views connection).
const MaxCountedDuplicates = 1000

// deliveryFrom selects deliveries (d) with the references to the events
// that hold their headers and bodies (see scanDelivery).
// The last columns are the provider and how many other deliveries of the
// address carry the same provider id (redeliveries, MaxCountedDuplicates
// at most: the LIMIT is one more), through its index; then how the relay
// answered the sender itself, for explanations; last the bytes its events
// hold in the log and those of its receipt alone, which its read of them
// reserves (deliveryRefs.stored, deliveryRefs.requestBytes).
const deliveryFrom = `SELECT d.position, d.id, d.address, d.kind, d.account_id, d.method, d.target, d.host,
		d.proto, d.remote_addr, d.body_size, d.complete, d.received_at, d.response_status,
		d.stream, d.revision, d.response_stream, d.response_revision, d.updated_position,
		d.provider, d.provider_event, d.provider_delivery_id,
		CASE WHEN d.provider_delivery_id IS NULL THEN 0 ELSE (SELECT COUNT(*) - 1 FROM (SELECT 1 FROM deliveries x
			WHERE x.address = d.address AND x.provider_delivery_id = d.provider_delivery_id LIMIT 1001)) END,
		d.answered_status, d.answered_reason, d.answered_at, d.stored_bytes, d.request_bytes
	FROM deliveries d `

// scanDelivery reads a row of deliveryFrom: the delivery without headers,
// bodies and attempts, and where in the log to find the headers and bodies.
func scanDelivery(row interface{ Scan(...any) error }) (readmodel.Delivery, deliveryRefs, error) {
	var (
		d                      readmodel.Delivery
		r                      deliveryRefs
		pos, updated, received int64
		kind                   string
		status                 sql.NullInt64
		stream, rStream        sql.NullString
		rev                    int64
		rRev                   sql.NullInt64
		provider, event, pid   sql.NullString
		answered, answeredAt   sql.NullInt64
		answeredWhy            string
	)
	err := row.Scan(&pos, &d.ID, &d.Address, &kind, &d.AccountID, &d.Method, &d.Target, &d.Host, &d.Proto,
		&d.RemoteAddr, &d.BodySize, &d.Complete, &received, &status, &stream, &rev, &rStream, &rRev, &updated,
		&provider, &event, &pid, &d.Duplicates, &answered, &answeredWhy, &answeredAt, &r.stored, &r.requestBytes)
	if err != nil {
		return readmodel.Delivery{}, deliveryRefs{}, err
	}
	if provider.Valid {
		d.Provider = &domain.Provider{Name: provider.String, EventType: event.String, DeliveryID: pid.String}
	}
	d.Kind = domain.AddressKind(kind)
	d.Position, d.UpdatedPosition = uint64(pos), uint64(updated)
	d.Cursor = readmodel.EncodeCursor(d.Position)
	d.ReceivedAt = fromNanos(received)
	if status.Valid {
		s := int(status.Int64)
		d.ResponseStatus = &s
	}
	if answered.Valid {
		d.RelayAnswer = &readmodel.RelayAnswer{Status: int(answered.Int64), Reason: answeredWhy, At: fromNanos(answeredAt.Int64)}
	}
	d.Attempts = []readmodel.Attempt{}

	own := domain.DeliveryStream(d.ID)
	r.request = logEventRef{stream: own, revision: uint64(rev)}
	if stream.Valid {
		r.request.stream = stream.String
	}
	if rRev.Valid {
		r.response = &logEventRef{stream: own, revision: uint64(rRev.Int64)}
		if rStream.Valid {
			r.response.stream = rStream.String
		}
	}
	return d, r, nil
}

// Delivery returns one delivery with its attempts.
func (v *History) Delivery(ctx context.Context, id string) (readmodel.Delivery, error) {
	return v.delivery(ctx, id, true)
}

// DeliverySummary is Delivery without what only the log holds: Headers,
// Body, ResponseHeaders and ResponseBody are nil. It reads nothing from
// the log, for callers (history lists, live rows) that show none of them.
func (v *History) DeliverySummary(ctx context.Context, id string) (readmodel.Delivery, error) {
	return v.delivery(ctx, id, false)
}

func (v *History) delivery(ctx context.Context, id string, payload bool) (readmodel.Delivery, error) {
	tx, err := v.r.BeginTx(ctx, nil)
	if err != nil {
		return readmodel.Delivery{}, fmt.Errorf("read delivery %q: %w", id, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	d, refs, err := scanDelivery(tx.StmtContext(ctx, v.rs.delivery).QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Delivery{}, notFound("delivery", id)
	}
	if err != nil {
		return readmodel.Delivery{}, fmt.Errorf("read delivery %q: %w", id, err)
	}
	items := []readmodel.Delivery{d}
	if err := attachAttempts(ctx, tx.StmtContext(ctx, v.rs.deliveryAttempts), items, int64(d.Position)); err != nil {
		return readmodel.Delivery{}, fmt.Errorf("read delivery %q: %w", id, err)
	}
	_ = tx.Rollback() // the rest comes from the log
	if !payload {
		return items[0], nil
	}
	if err := v.fillFromLog(ctx, &items[0], refs); err != nil {
		return readmodel.Delivery{}, fmt.Errorf("read delivery %q: %w", id, err)
	}
	return items[0], nil
}

// DeliveryAccount returns the account a delivery belongs to ("" for an
// inspector's): the owner check alone, without the bodies, headers and
// attempts that Delivery reads.
func (v *History) DeliveryAccount(ctx context.Context, id string) (string, error) {
	var account string
	err := v.r.QueryRowContext(ctx, "SELECT account_id FROM deliveries WHERE id = ?", id).Scan(&account)
	if errors.Is(err, sql.ErrNoRows) {
		return "", notFound("delivery", id)
	}
	if err != nil {
		return "", fmt.Errorf("read owner of delivery %q: %w", id, err)
	}
	return account, nil
}

// Deliveries lists an address's history newest first. first is the page size
// (0 means DefaultPageSize, at most MaxPageSize); after is the cursor of the
// last delivery already seen ("" for the newest). A negative first or a
// malformed cursor is a *domain.InvalidInputError.
func (v *History) Deliveries(ctx context.Context, address string, first int, after string) (readmodel.Page, error) {
	return v.deliveries(ctx, address, first, after, true, nil)
}

// DeliveriesAdmitted is Deliveries that first shows admit the page's rows
// as the views hold them (sizes, no headers or bodies) and reads the log
// only if it returns nil: a reader that counts what it loads against a
// budget (the API's answers) refuses a page before its bodies are read,
// not after. admit's error is returned as it is.
func (v *History) DeliveriesAdmitted(ctx context.Context, address string, first int, after string, admit func([]readmodel.Delivery) error) (readmodel.Page, error) {
	return v.deliveries(ctx, address, first, after, true, admit)
}

// DeliverySummaries is Deliveries without what only the log holds (see
// DeliverySummary): one query, no read of the log per delivery.
func (v *History) DeliverySummaries(ctx context.Context, address string, first int, after string) (readmodel.Page, error) {
	return v.deliveries(ctx, address, first, after, false, nil)
}

func (v *History) deliveries(ctx context.Context, address string, first int, after string, payload bool, admit func([]readmodel.Delivery) error) (readmodel.Page, error) {
	size, before, err := pageBounds(first, after)
	if err != nil {
		return readmodel.Page{}, err
	}
	tx, err := v.r.BeginTx(ctx, nil)
	if err != nil {
		return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	rows, err := tx.StmtContext(ctx, v.rs.page).QueryContext(ctx, address, before, size+1)
	if err != nil {
		return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
	}
	items, refs := []readmodel.Delivery{}, []deliveryRefs{}
	for rows.Next() {
		d, r, err := scanDelivery(rows)
		if err != nil {
			rows.Close()
			return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
		}
		items, refs = append(items, d), append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
	}
	var p readmodel.Page
	if len(items) > size {
		items, refs, p.HasNextPage = items[:size], refs[:size], true
	}
	if len(items) > 0 {
		lo, hi := items[len(items)-1].Position, items[0].Position
		if err := attachAttempts(ctx, tx.StmtContext(ctx, v.rs.pageAttempts), items,
			address, int64(lo), int64(hi)); err != nil {
			return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
		}
		p.EndCursor = items[len(items)-1].Cursor
	}
	_ = tx.Rollback() // the rest comes from the log
	if !payload {
		p.Items = items
		return p, nil
	}
	if admit != nil {
		if err := admit(items); err != nil {
			return readmodel.Page{}, err // the caller's refusal, its message its own
		}
	}
	if err := v.fillPageFromLog(ctx, items, refs); err != nil {
		return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
	}
	p.Items = items
	return p, nil
}

// The last column tells a late attempt: one with an outcome, requested
// before the relay answered the sender itself (its DeliveryAnswered).
const attemptColumns = `delivery_position, attempt_id, status, started_at, duration_ms, error, retry, edit,
	agent_id, node, outcome_at, signature, fidelity, copy, queued, possible_duplicate,
	outcome_position IS NOT NULL AND COALESCE(position < (SELECT answered_position FROM deliveries
		WHERE deliveries.position = attempts.delivery_position), 0)`

// attachAttempts runs query (attempts in position order) and appends each
// attempt to its delivery among items.
func attachAttempts(ctx context.Context, query *sql.Stmt, items []readmodel.Delivery, args ...any) error {
	byPos := make(map[uint64]int, len(items))
	for i, d := range items {
		byPos[d.Position] = i
	}
	rows, err := query.QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			a         readmodel.Attempt
			dpos      int64
			started   int64
			status    sql.NullInt64
			durationM sql.NullInt64
			edit      sql.NullString
			outcomeAt sql.NullInt64
			signature sql.NullString
			fidelity  sql.NullString
		)
		if err := rows.Scan(&dpos, &a.ID, &status, &started, &durationM, &a.Error, &a.Retry, &edit,
			&a.AgentID, &a.Node, &outcomeAt, &signature, &fidelity, &a.Copy, &a.Queued, &a.PossibleDuplicate, &a.Late); err != nil {
			return fmt.Errorf("read attempts: %w", err)
		}
		if edit.Valid {
			var se storedEdit
			if err := json.Unmarshal([]byte(edit.String), &se); err != nil {
				return fmt.Errorf("read the edit of attempt %s: %w", a.ID, err)
			}
			a.Edit, a.EditBodySize = &se.RequestEdit, se.BodySize
		}
		a.StartedAt = fromNanos(started)
		a.Signature = signature.String
		if fidelity.Valid {
			a.Fidelity = &readmodel.Fidelity{Differences: []string{}}
			if fidelity.String != "" {
				a.Fidelity.Differences = strings.Split(fidelity.String, ",")
			}
		}
		if outcomeAt.Valid {
			a.OutcomeAt = fromNanos(outcomeAt.Int64)
		}
		if status.Valid {
			s := int(status.Int64)
			a.Status = &s
		}
		if durationM.Valid {
			ms := durationM.Int64
			a.DurationMs = &ms
		}
		if i, ok := byPos[uint64(dpos)]; ok {
			items[i].Attempts = append(items[i].Attempts, a)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	return nil
}

// ReplayWindow is how many of an address's newest deliveries ChangedSince
// looks at: a change to an older delivery after since is not reported.
const ReplayWindow = 1000

// ChangedSince returns the ids of the deliveries of address that an event
// after since changed or created, in the order of their latest change,
// among the address's ReplayWindow newest deliveries. since is a delivery's
// cursor, or "" for the start of the history. A live reader that has shown
// the history up to a delivery and registers a Watch calls it to learn what
// it may have missed in between; a malformed cursor is a
// *domain.InvalidInputError naming the field "since".
func (v *History) ChangedSince(ctx context.Context, address, since string) ([]string, error) {
	var from uint64
	if since != "" {
		pos, err := readmodel.DecodeCursor("since", since)
		if err != nil {
			return nil, err
		}
		from = pos
	}
	rows, err := v.r.QueryContext(ctx, `SELECT id FROM (
		SELECT id, updated_position FROM deliveries WHERE address = ? ORDER BY position DESC LIMIT ?
	) WHERE updated_position > ? ORDER BY updated_position`, address, ReplayWindow, int64(from))
	if err != nil {
		return nil, fmt.Errorf("deliveries of %q changed since %d: %w", address, from, err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("deliveries of %q changed since %d: %w", address, from, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("deliveries of %q changed since %d: %w", address, from, err)
	}
	return ids, nil
}

// CreatedAfter returns, oldest first, the ids of at most limit deliveries
// of address received after the delivery whose cursor is after. A smee
// stream's client that reconnects with the id of the last event it got
// (a cursor) reads what it missed with it; a malformed cursor is a
// *domain.InvalidInputError naming the field "after".
func (v *History) CreatedAfter(ctx context.Context, address, after string, limit int) ([]string, error) {
	from, err := readmodel.DecodeCursor("after", after)
	if err != nil {
		return nil, err
	}
	rows, err := v.r.QueryContext(ctx, `SELECT id FROM deliveries WHERE address = ? AND position > ?
		ORDER BY position LIMIT ?`, address, int64(from), limit)
	if err != nil {
		return nil, fmt.Errorf("deliveries of %q after %d: %w", address, from, err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("deliveries of %q after %d: %w", address, from, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("deliveries of %q after %d: %w", address, from, err)
	}
	return ids, nil
}

// OpenAttempts lists attempts without an outcome, oldest first. After a
// restart none of them will get one: the sender's connection and the
// agent's session ended with the process; the service records them as
// failed at startup.
func (v *History) OpenAttempts(ctx context.Context) ([]readmodel.OpenAttempt, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT d.id, a.attempt_id, a.node FROM attempts a
		JOIN deliveries d ON d.position = a.delivery_position
		WHERE a.outcome_position IS NULL ORDER BY a.position`)
	if err != nil {
		return nil, fmt.Errorf("list open attempts: %w", err)
	}
	defer rows.Close()
	out := []readmodel.OpenAttempt{}
	for rows.Next() {
		var a readmodel.OpenAttempt
		if err := rows.Scan(&a.DeliveryID, &a.AttemptID, &a.Node); err != nil {
			return nil, fmt.Errorf("list open attempts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open attempts: %w", err)
	}
	return out, nil
}
