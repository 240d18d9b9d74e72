package projections

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// A filtered page examines a bounded share of the history, newest first,
// so that a search answers in bounded time however rare its matches: at
// most searchWindow deliveries by what the views hold (method, path,
// status, attempts, time, completeness), and of those at most logCandidates
// by what only the log holds (headers, body), reading at most
// Options.SearchLogBytes of their events. A page may then hold fewer rows
// than asked, even none, with hasNextPage: its endCursor continues the
// search below what was examined.
const (
	searchWindow  = 100_000
	logCandidates = 500
)

// DefaultSearchLogBytes is the log a filtered page may read to match
// headers and bodies when Options.SearchLogBytes is zero: 16 MiB, the
// first 64 candidates of 256 KiB (the capture cap) or all 500 of 32 KiB.
const DefaultSearchLogBytes = 16 << 20

// DefaultSearchLogRate is how fast all searches together may read the log
// to match headers and bodies when Options.SearchLogRate is zero: 32 MiB/s
// sustained, a page's budget at once. Matching costs about a core-second
// per 100-250 MiB; the pace keeps searches to a share of one core however
// many accounts search, so ordinary reads and ingress keep the rest.
const DefaultSearchLogRate = 32 << 20

// searchConns is the size of the views' pool for searches, apart from the
// readers of everything else: a search's queries walk up to searchWindow
// rows, and a page of history, an account or an Endpoint must never wait
// behind them. One searcher (readmodel.WithReader) holds at most
// searchShare of them at once, its other queries waiting for its own to
// end: another searcher's page always finds a connection no one searcher
// holds, and waits behind at most the one walk of each other searcher.
const (
	searchConns = 2
	searchShare = searchConns - 1
)

// noAgentError is the error an attempt records when no agent was
// connected to take it (the tunnel's forward).
var noAgentError = domain.FailureNoAgent

// SearchDeliveries lists an address's deliveries that match f, newest
// first, paged like Deliveries (see the bounds above). payload reads the
// headers and bodies, as Deliveries does.
//
// The views are read in two short queries on the search pool (the
// candidates, then the attempts of the matches); no views connection is
// held while the log is read. Headers and bodies are matched one
// candidate at a time and dropped: a page holds the payloads of its
// matches only, read again once it is known.
func (v *History) SearchDeliveries(ctx context.Context, address string, first int, after string, f readmodel.DeliveryFilter, payload bool) (readmodel.Page, error) {
	if err := checkFilter(f); err != nil {
		return readmodel.Page{}, err
	}
	size, before, err := pageBounds(first, after)
	if err != nil {
		return readmodel.Page{}, err
	}
	limit := size + 1
	if f.NeedsLog() {
		limit = logCandidates
	}
	items, refs, floor, err := v.searchCandidates(ctx, address, before, f, limit)
	if err != nil {
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
		rest = readmodel.EncodeCursor(uint64(floor))
	}
	if f.NeedsLog() {
		m, err := v.matchFromLog(ctx, items, refs, f, size+1)
		if err != nil {
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
		items, refs = m.items, m.refs
		if m.cut {
			// The budget ran out before the candidates did: the next page
			// goes on below the last one read.
			p.SearchCut, rest = true, m.lastCursor
		}
	}
	switch {
	case len(items) > size:
		items, refs, p.HasNextPage = items[:size], refs[:size], true
		p.EndCursor = items[len(items)-1].Cursor
		p.SearchCut = false // the page is full: nothing was left out of it
	case rest != "":
		p.HasNextPage, p.EndCursor = true, rest
	case len(items) > 0:
		p.EndCursor = items[len(items)-1].Cursor
	}
	if len(items) > 0 {
		if err := v.searchAttempts(ctx, items); err != nil {
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
	}
	if payload {
		if err := v.fillPageFromLog(ctx, items, refs); err != nil {
			return readmodel.Page{}, fmt.Errorf("search deliveries of %q: %w", address, err)
		}
	}
	p.Items = items
	return p, nil
}

// searchCandidates reads, in one read transaction on the search pool, the
// window's floor (the oldest position the page may examine; 0: the window
// reaches the first delivery) and up to limit deliveries below before
// that match what the views hold of f. The connection is released when it
// returns.
func (v *History) searchCandidates(ctx context.Context, address string, before int64, f readmodel.DeliveryFilter, limit int) ([]readmodel.Delivery, []deliveryRefs, int64, error) {
	tx, done, err := v.searchTx(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	defer done()
	var floor int64
	err = tx.QueryRowContext(ctx, `SELECT position FROM deliveries WHERE address = ? AND position < ?
		ORDER BY position DESC LIMIT 1 OFFSET ?`, address, before, searchWindow-1).Scan(&floor)
	if err != nil && err != sql.ErrNoRows {
		return nil, nil, 0, err
	}
	where, args := filterSQL(f)
	q := deliveryFrom + `WHERE d.address = ? AND d.position < ? AND d.position >= ?` + where + ` ORDER BY d.position DESC LIMIT ?`
	rows, err := tx.QueryContext(ctx, q, append(append([]any{address, before, floor}, args...), limit)...)
	if err != nil {
		return nil, nil, 0, err
	}
	defer rows.Close()
	items, refs := []readmodel.Delivery{}, []deliveryRefs{}
	for rows.Next() {
		d, r, err := scanDelivery(rows)
		if err != nil {
			return nil, nil, 0, err
		}
		items, refs = append(items, d), append(refs, r)
	}
	return items, refs, floor, rows.Err()
}

// searchAttempts reads the attempts of a page's matches in a short read
// transaction of their own on the search pool.
func (v *History) searchAttempts(ctx context.Context, items []readmodel.Delivery) error {
	tx, done, err := v.searchTx(ctx)
	if err != nil {
		return err
	}
	defer done()
	return attachAttemptsOf(ctx, tx, items)
}

// searchTx begins a read transaction on the search pool within the
// searcher's share of it (see searchConns); done ends both.
func (v *History) searchTx(ctx context.Context) (tx *sql.Tx, done func(), err error) {
	release, err := v.srShares.Take(ctx, readmodel.ReaderOf(ctx), searchShare)
	if err != nil {
		return nil, nil, fmt.Errorf("wait for the searcher's share of the search pool: %w", err)
	}
	tx, err = v.sr.BeginTx(ctx, nil)
	if err != nil {
		release()
		return nil, nil, err
	}
	return tx, func() {
		_ = tx.Rollback() // read-only
		release()
	}, nil
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

// logMatches is what matchFromLog kept of the candidates.
type logMatches struct {
	items []readmodel.Delivery
	refs  []deliveryRefs
	// cut: the byte budget ran out before the candidates did;
	// lastCursor is the cursor of the last candidate read.
	cut        bool
	lastCursor string
}

// matchFromLog reads the candidates' requests from the log one at a time,
// newest first, and keeps those that match, up to want, without their
// headers and bodies: each is dropped once tested. It stops before the
// next candidate once the events read reach the byte budget (at least one
// is always read, so every page makes progress).
func (v *History) matchFromLog(ctx context.Context, items []readmodel.Delivery, refs []deliveryRefs, f readmodel.DeliveryFilter, want int) (logMatches, error) {
	var (
		m       logMatches
		spent   int64
		scratch []byte // the body being tested
	)
	for i := 0; i < len(items) && len(m.items) < want; i++ {
		if i > 0 && spent >= v.searchBytes {
			m.cut = true
			break
		}
		n, ok, err := v.requestMatches(ctx, items[i].ID, refs[i].request, f, &scratch)
		if err != nil {
			return logMatches{}, fmt.Errorf("delivery %s: %w", items[i].ID, err)
		}
		spent += int64(n)
		m.lastCursor = items[i].Cursor
		// Paid after the read (its size is known only then): the next one
		// waits while the searches read faster than their pace.
		if err := v.searchPace.WaitN(ctx, min(n, v.searchPace.Burst())); err != nil {
			return logMatches{}, err
		}
		if ok {
			m.items, m.refs = append(m.items, items[i]), append(m.refs, refs[i])
		}
		// Let waiting requests (a page, an ingest) have this core between
		// two candidates rather than after the scheduler's 10 ms slice.
		runtime.Gosched()
	}
	return m, nil
}

// requestMatches reads the DeliveryReceived of delivery id at ref and
// reports how many bytes of event it read and whether its headers and
// body match f.
func (v *History) requestMatches(ctx context.Context, id string, ref logEventRef, f readmodel.DeliveryFilter, scratch *[]byte) (int, bool, error) {
	read, err := v.readStream(ctx, ref.stream, ref.revision, 1)
	if err != nil {
		return 0, false, fmt.Errorf("read request at %s: %w", ref, err)
	}
	if len(read) == 0 || read[0].Revision != ref.revision {
		return 0, false, fmt.Errorf("read request at %s: %w", ref, errNotInLog)
	}
	n := len(read[0].Data)
	req, err := v.decodeSearched(read[0].Type, read[0].Data, scratch)
	if err != nil || req.DeliveryID != id {
		return n, false, fmt.Errorf("read request at %s: not the DeliveryReceived of %s (%v)", ref, id, err)
	}
	return n, matchesLog(req.Headers, req.Body, req.DroppedHeaders, f), nil
}

// matchesLog is the part of f only the log answers.
func matchesLog(headers []domain.Header, body []byte, dropped int, f readmodel.DeliveryFilter) bool {
	if f.DroppedHeaders && dropped == 0 {
		return false
	}
	if f.BodyContains != "" && !bytes.Contains(body, []byte(f.BodyContains)) {
		return false
	}
	if f.Header == "" {
		return true
	}
	for _, h := range headers {
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
