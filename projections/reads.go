package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Reads run on the reader pool. Each returns an error wrapping
// domain.ErrNotFound when the thing is absent. Reads that touch several
// tables run in one transaction so they see one committed batch.

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func notFound(what, id string) error { return fmt.Errorf("%s %q: %w", what, id, domain.ErrNotFound) }

// pointRead returns the context a one-row read by key runs under. Such a read
// takes microseconds, while a cancellable context makes the SQLite driver arm
// a watcher goroutine for the statement, which on the per-request paths
// (address, token) cost more than the read itself. A context that has
// already ended still fails the read.
func pointRead(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// Inspector returns a guest inspector.
func (v *Views) Inspector(ctx context.Context, id string) (readmodel.Inspector, error) {
	var (
		i                    readmodel.Inspector
		created, last, ttlMs int64
	)
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Inspector{}, fmt.Errorf("read inspector %q: %w", id, err)
	}
	err = v.rs.inspector.QueryRowContext(qctx, id).Scan(&i.ID, &created, &last, &ttlMs, &i.Expired,
		&i.Purged, &i.StoredBytes, &i.Refused)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Inspector{}, notFound("inspector", id)
	}
	if err != nil {
		return readmodel.Inspector{}, fmt.Errorf("read inspector %q: %w", id, err)
	}
	i.CreatedAt, i.LastActivityAt = fromNanos(created), fromNanos(last)
	i.TTL = time.Duration(ttlMs) * time.Millisecond
	i.ExpiresAt = i.LastActivityAt.Add(i.TTL)
	return i, nil
}

// Address returns the inspector or Endpoint (deleted ones included, with
// Deleted set) whose id is the first label of a public hostname. It runs on
// every public request, so it is served from memory when it can (see
// addrcache.go) and is otherwise one prepared statement (see qAddress).
func (v *Views) Address(ctx context.Context, id string) (readmodel.Address, error) {
	cached, gen, ok := v.addresses.get(id)
	if ok {
		return cached, nil
	}
	a, err := v.readAddress(ctx, id)
	if err != nil {
		return readmodel.Address{}, err
	}
	v.addresses.put(id, a, gen)
	return a, nil
}

func (v *Views) readAddress(ctx context.Context, id string) (readmodel.Address, error) {
	var (
		a           readmodel.Address
		endpoint    bool
		mode        string
		last, ttlMs int64
	)
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Address{}, fmt.Errorf("read address %q: %w", id, err)
	}
	err = v.rs.address.QueryRowContext(qctx, id).Scan(&endpoint, &a.ID, &a.AccountID, &mode, &a.Target,
		&a.ResponseCapture, &a.Deleted, &a.Expired, &last, &ttlMs, &a.StoredBytes)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Address{}, notFound("address", id)
	}
	if err != nil {
		return readmodel.Address{}, fmt.Errorf("read address %q: %w", id, err)
	}
	a.LastActivityAt = fromNanos(last)
	if endpoint {
		a.Kind, a.Mode = domain.AddressEndpoint, domain.EndpointMode(mode)
		return a, nil
	}
	a.Kind, a.TTL = domain.AddressInspector, time.Duration(ttlMs)*time.Millisecond
	a.ExpiresAt = a.LastActivityAt.Add(a.TTL)
	return a, nil
}

// deliveryFrom selects deliveries (d) with the references to the events
// that hold their headers and bodies (see scanDelivery).
const deliveryFrom = `SELECT d.position, d.id, d.address, d.kind, d.account_id, d.method, d.target, d.host,
		d.proto, d.remote_addr, d.body_size, d.complete, d.received_at, d.response_status,
		d.stream, d.revision, d.response_stream, d.response_revision, d.updated_position
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
	)
	err := row.Scan(&pos, &d.ID, &d.Address, &kind, &d.AccountID, &d.Method, &d.Target, &d.Host, &d.Proto,
		&d.RemoteAddr, &d.BodySize, &d.Complete, &received, &status, &stream, &rev, &rStream, &rRev, &updated)
	if err != nil {
		return readmodel.Delivery{}, deliveryRefs{}, err
	}
	d.Kind = domain.AddressKind(kind)
	d.Position, d.UpdatedPosition = uint64(pos), uint64(updated)
	d.Cursor = encodeCursor(d.Position)
	d.ReceivedAt = fromNanos(received)
	if status.Valid {
		s := int(status.Int64)
		d.ResponseStatus = &s
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
func (v *Views) Delivery(ctx context.Context, id string) (readmodel.Delivery, error) {
	return v.delivery(ctx, id, true)
}

// DeliverySummary is Delivery without what only the log holds: Headers,
// Body, ResponseHeaders and ResponseBody are nil. It reads nothing from
// the log, for callers (history lists, live rows) that show none of them.
func (v *Views) DeliverySummary(ctx context.Context, id string) (readmodel.Delivery, error) {
	return v.delivery(ctx, id, false)
}

func (v *Views) delivery(ctx context.Context, id string, payload bool) (readmodel.Delivery, error) {
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
func (v *Views) DeliveryAccount(ctx context.Context, id string) (string, error) {
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
func (v *Views) Deliveries(ctx context.Context, address string, first int, after string) (readmodel.Page, error) {
	return v.deliveries(ctx, address, first, after, true)
}

// DeliverySummaries is Deliveries without what only the log holds (see
// DeliverySummary): one query, no read of the log per delivery.
func (v *Views) DeliverySummaries(ctx context.Context, address string, first int, after string) (readmodel.Page, error) {
	return v.deliveries(ctx, address, first, after, false)
}

func (v *Views) deliveries(ctx context.Context, address string, first int, after string, payload bool) (readmodel.Page, error) {
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
	if err := v.fillPageFromLog(ctx, items, refs); err != nil {
		return readmodel.Page{}, fmt.Errorf("list deliveries of %q: %w", address, err)
	}
	p.Items = items
	return p, nil
}

const attemptColumns = "delivery_position, attempt_id, status, started_at, duration_ms, error, retry"

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
		)
		if err := rows.Scan(&dpos, &a.ID, &status, &started, &durationM, &a.Error, &a.Retry); err != nil {
			return fmt.Errorf("read attempts: %w", err)
		}
		a.StartedAt = fromNanos(started)
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
func (v *Views) ChangedSince(ctx context.Context, address, since string) ([]string, error) {
	var from uint64
	if since != "" {
		pos, err := decodeCursor("since", since)
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
