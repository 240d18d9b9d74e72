package projections

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// A filtered page examines a bounded share of the history, newest first,
// so that a search answers in bounded time however rare its matches: at
// most searchWindow deliveries by what the views hold (method, path,
// status, attempts, time, completeness), and of those at most logCandidates
// by what only the log holds (headers, body). A page may then hold fewer
// rows than asked, even none, with hasNextPage: its endCursor continues
// the search below what was examined.
const (
	searchWindow  = 100_000
	logCandidates = 500
)

// noAgentError is the error an attempt records when no agent was
// connected to take it (the tunnel's forward).
var noAgentError = domain.FailureNoAgent

// SearchDeliveries lists an address's deliveries that match f, newest
// first, paged like Deliveries (see the bounds above). payload reads the
// headers and bodies, as Deliveries does.
func (v *History) SearchDeliveries(ctx context.Context, address string, first int, after string, f readmodel.DeliveryFilter, payload bool) (readmodel.Page, error) {
	if err := checkFilter(f); err != nil {
		return readmodel.Page{}, err
	}
	size, before, err := pageBounds(first, after)
	if err != nil {
		return readmodel.Page{}, err
	}
	tx, err := v.r.BeginTx(ctx, nil)
	if err != nil {
		return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	// The window's floor: the oldest position this page may examine (0:
	// the window reaches the first delivery).
	var floor int64
	err = tx.QueryRowContext(ctx, `SELECT position FROM deliveries WHERE address = ? AND position < ?
		ORDER BY position DESC LIMIT 1 OFFSET ?`, address, before, searchWindow-1).Scan(&floor)
	if err != nil && err != sql.ErrNoRows {
		return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
	}
	where, args := filterSQL(f)
	limit := size + 1
	if f.NeedsLog() {
		limit = logCandidates
	}
	q := deliveryFrom + `WHERE d.address = ? AND d.position < ? AND d.position >= ?` + where + ` ORDER BY d.position DESC LIMIT ?`
	rows, err := tx.QueryContext(ctx, q, append(append([]any{address, before, floor}, args...), limit)...)
	if err != nil {
		return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
	}
	items, refs := []readmodel.Delivery{}, []deliveryRefs{}
	for rows.Next() {
		d, r, err := scanDelivery(rows)
		if err != nil {
			rows.Close()
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
		items, refs = append(items, d), append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
	}
	// Where the examined share ends when the page is not full: below the
	// last candidate when the candidates were cut, else below the window.
	var p readmodel.Page
	rest := ""
	switch {
	case len(items) == limit && f.NeedsLog():
		rest = items[len(items)-1].Cursor
	case floor > 0:
		rest = encodeCursor(uint64(floor))
	}
	filled := false
	if f.NeedsLog() {
		if items, refs, err = v.matchFromLog(ctx, items, refs, f, size+1); err != nil {
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
		filled = true
	}
	switch {
	case len(items) > size:
		items, refs, p.HasNextPage = items[:size], refs[:size], true
		p.EndCursor = items[len(items)-1].Cursor
	case rest != "":
		p.HasNextPage, p.EndCursor = true, rest
	case len(items) > 0:
		p.EndCursor = items[len(items)-1].Cursor
	}
	if len(items) > 0 {
		if err := attachAttemptsOf(ctx, tx, items); err != nil {
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
	}
	_ = tx.Rollback() // the rest comes from the log
	if payload && !filled {
		if err := v.fillPageFromLog(ctx, items, refs); err != nil {
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
	}
	if !payload && filled {
		for i := range items {
			items[i].Headers, items[i].Body, items[i].ResponseHeaders, items[i].ResponseBody, items[i].Trailers = nil, nil, nil, nil, nil
		}
	}
	p.Items = items
	return p, nil
}

// checkFilter refuses what cannot match anything as asked.
func checkFilter(f readmodel.DeliveryFilter) error {
	switch {
	case f.StatusClass < 0 || f.StatusClass > 5:
		return &domain.InvalidInputError{Field: "statusClass", Reason: "must be 1 to 5 (1xx to 5xx)"}
	case f.Status != 0 && (f.Status < 100 || f.Status > 599):
		return &domain.InvalidInputError{Field: "status", Reason: "must be an HTTP status, 100 to 599"}
	case f.AttemptStatus != 0 && (f.AttemptStatus < 100 || f.AttemptStatus > 599):
		return &domain.InvalidInputError{Field: "attemptStatus", Reason: "must be an HTTP status, 100 to 599"}
	case f.Pending && (f.Status != 0 || f.StatusClass != 0):
		return &domain.InvalidInputError{Field: "pending", Reason: "a pending delivery has no status: give pending or a status, not both"}
	case !f.ReceivedAfter.IsZero() && !f.ReceivedBefore.IsZero() && !f.ReceivedAfter.Before(f.ReceivedBefore):
		return &domain.InvalidInputError{Field: "receivedBefore", Reason: "must be after receivedAfter"}
	case f.HeaderValue != "" && f.Header == "":
		return &domain.InvalidInputError{Field: "headerValue", Reason: "needs header: the name whose value it is"}
	case len(f.Method) > 64 || len(f.Path) > 8192 || len(f.PathPrefix) > 8192 || len(f.Header) > 256 ||
		len(f.HeaderValue) > 8192 || len(f.BodyContains) > 8192 || len(f.ProviderEvent) > 256 || len(f.ProviderDeliveryID) > 256:
		return &domain.InvalidInputError{Field: "filter", Reason: "a field is too long (method 64 bytes, header name 256, others 8 KiB)"}
	}
	return nil
}

// filterSQL is the part of f the views answer, as conditions on d.
func filterSQL(f readmodel.DeliveryFilter) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	cond := func(s string, a ...any) {
		b.WriteString(" AND ")
		b.WriteString(s)
		args = append(args, a...)
	}
	if f.Method != "" {
		cond("d.method = ?", f.Method)
	}
	if f.Path != "" {
		// The target holds the query string too; substr, unlike LIKE, is
		// exact and case-sensitive.
		cond("(d.target = ? OR substr(d.target, 1, ?) = ?)", f.Path, len(f.Path)+1, f.Path+"?")
	}
	if f.PathPrefix != "" {
		cond("substr(d.target, 1, ?) = ?", len(f.PathPrefix), f.PathPrefix)
	}
	if f.Status != 0 {
		cond("d.response_status = ?", f.Status)
	}
	if f.StatusClass != 0 {
		cond("d.response_status BETWEEN ? AND ?", f.StatusClass*100, f.StatusClass*100+99)
	}
	if f.Pending {
		cond("d.response_status IS NULL")
	}
	if f.AttemptStatus != 0 {
		cond("EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_position = d.position AND a.status = ?)", f.AttemptStatus)
	}
	if !f.ReceivedAfter.IsZero() {
		cond("d.received_at >= ?", f.ReceivedAfter.UnixNano())
	}
	if !f.ReceivedBefore.IsZero() {
		cond("d.received_at < ?", f.ReceivedBefore.UnixNano())
	}
	if f.IncompleteBody {
		cond("d.complete = 0")
	}
	if f.RefusedOffline {
		// What the sender got is the latest attempt's answer: a 503 that no
		// agent was connected for, not one a local process answered.
		cond(`d.response_status = 503 AND (SELECT a.error FROM attempts a WHERE a.delivery_position = d.position
			AND a.outcome_position IS NOT NULL ORDER BY a.position DESC LIMIT 1) = ?`, noAgentError)
	}
	if f.ProviderEvent != "" {
		cond("d.provider_event = ?", f.ProviderEvent)
	}
	if f.ProviderDeliveryID != "" {
		cond("d.provider_delivery_id = ?", f.ProviderDeliveryID)
	}
	return b.String(), args
}

// matchFromLog reads the candidates' headers and bodies from the log, a
// few at a time, and keeps those that match, up to want.
func (v *History) matchFromLog(ctx context.Context, items []readmodel.Delivery, refs []deliveryRefs, f readmodel.DeliveryFilter, want int) ([]readmodel.Delivery, []deliveryRefs, error) {
	const chunk = 32
	var (
		keep     []readmodel.Delivery
		keepRefs []deliveryRefs
	)
	for lo := 0; lo < len(items) && len(keep) < want; lo += chunk {
		hi := min(lo+chunk, len(items))
		if err := v.fillPageFromLog(ctx, items[lo:hi], refs[lo:hi]); err != nil {
			return nil, nil, err
		}
		for i := lo; i < hi && len(keep) < want; i++ {
			if matchesLog(items[i], f) {
				keep, keepRefs = append(keep, items[i]), append(keepRefs, refs[i])
			}
		}
	}
	return keep, keepRefs, nil
}

// matchesLog is the part of f only the log answers.
func matchesLog(d readmodel.Delivery, f readmodel.DeliveryFilter) bool {
	if f.DroppedHeaders && d.DroppedHeaders == 0 {
		return false
	}
	if f.BodyContains != "" && !bytes.Contains(d.Body, []byte(f.BodyContains)) {
		return false
	}
	if f.Header == "" {
		return true
	}
	for _, h := range d.Headers {
		if strings.EqualFold(h.Name, f.Header) && (f.HeaderValue == "" || h.Value == f.HeaderValue) {
			return true
		}
	}
	return false
}

// attachAttemptsOf reads the attempts of exactly items (a filtered page's
// positions are scattered: a range would read every attempt between).
func attachAttemptsOf(ctx context.Context, tx *sql.Tx, items []readmodel.Delivery) error {
	var b strings.Builder
	args := make([]any, len(items))
	for i, d := range items {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("?")
		args[i] = int64(d.Position)
	}
	q := "SELECT " + attemptColumns + " FROM attempts WHERE delivery_position IN (" + b.String() + ") ORDER BY position"
	stmt, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	defer stmt.Close()
	return attachAttempts(ctx, stmt, items, args...)
}
