package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/evidence"
)

// appendRequest is one Append call waiting for the writer.
type appendRequest struct {
	ctx      context.Context // the caller's: a request cancelled before its turn is skipped
	stream   string
	expected domain.ExpectedRevision
	rows     []row
	reply    chan appendReply // buffered: the writer never waits for a caller
	// deleteStream makes the request a DeleteStream: rows is then empty and
	// the writer fills in the tombstone (see applyDelete).
	deleteStream bool
}

// row is an event encoded for storage, prepared by the caller's goroutine so
// the writer spends its time on SQL only.
type row struct {
	id, typ        string
	data, metadata []byte
	md             domain.Metadata // metadata as a read decodes it, for the tail
	payload        domain.Event    // the event as given, for the tail (domain.EventData.Payload)
	// stored and enc are data as the row stores it (compress.go),
	// compressed on the caller's goroutine.
	stored []byte
	enc    int64
	buf    *[]byte // holds stored when it is compressed: released after the commit
	// digest is what the event's chain leaf is made of but its stream,
	// revision and position, hashed on the caller's goroutine too: the
	// writer, the one goroutine every append waits for, adds those.
	digest evidence.Digest
}

// newRow prepares an event for the writer: data compressed as stored, and
// what of its leaf does not depend on where it goes.
func newRow(id, typ string, data, metadata []byte, md domain.Metadata, payload domain.Event) row {
	stored, enc, buf := encodeData(data)
	return row{id: id, typ: typ, data: data, metadata: metadata, md: md, payload: payload, stored: stored, enc: enc, buf: buf,
		digest: evidence.DigestOf(evidence.Event{ID: id, Type: typ, Data: data, Metadata: metadata})}
}

type appendReply struct {
	res   domain.AppendResult
	err   error
	wrote bool // the append inserted its events (it is not a refusal or a retry)
}

// Append queues the append for the writer and waits until it is committed
// (durable) or refused. A conflict is a *domain.WrongExpectedRevisionError; an
// ID already stored elsewhere wraps domain.ErrDuplicateEventID; the same IDs
// at the same place return the original result without writing. If ctx ends
// while the writer holds the request, the append may still commit.
func (s *Store) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	wait, err := s.QueueAppend(ctx, stream, expected, events...)
	if err != nil {
		return domain.AppendResult{}, err
	}
	return wait()
}

// QueueAppend puts the append in the writer's queue and returns a function
// that waits for its outcome as Append does (domain.AppendQueuer). The
// writer takes appends strictly in queue order, so an append queued after
// this call returns is checked against this one's events.
func (s *Store) QueueAppend(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (func() (domain.AppendResult, error), error) {
	if err := envelope.Validate(stream, events); err != nil {
		return nil, fmt.Errorf("append to %s: %w", stream, err)
	}
	rows := make([]row, len(events))
	for i, e := range events {
		md, err := envelope.EncodeMetadata(e.Metadata)
		if err != nil {
			return nil, fmt.Errorf("append to %s: event %s: %w", stream, e.ID, err)
		}
		// Kept by the tail after Append returns, and handed to subscribers:
		// the caller does not change it (domain.EventStore). The column is
		// NOT NULL; nil and empty read back alike.
		data := e.Data
		if data == nil {
			data = []byte{}
		}
		m := e.Metadata
		m.OccurredAt = m.OccurredAt.UTC() // as stored and read back
		rows[i] = newRow(e.ID, e.Type, data, md, m, e.Payload)
	}
	req := &appendRequest{ctx: ctx, stream: stream, expected: expected, rows: rows, reply: make(chan appendReply, 1)}
	if err := s.enqueue(ctx, req); err != nil {
		return nil, fmt.Errorf("append to %s: %w", stream, err)
	}
	return sync.OnceValues(func() (domain.AppendResult, error) {
		select {
		case rep := <-req.reply:
			return rep.res, rep.err
		case <-ctx.Done():
			return domain.AppendResult{}, fmt.Errorf("append to %s: gave up waiting, outcome unknown: %w", stream, ctx.Err())
		}
	}), nil
}

// Accepting implements domain.AppendQueuer: ErrClosed once Close has
// begun.
func (s *Store) Accepting() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

func (s *Store) enqueue(ctx context.Context, req *appendRequest) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	select {
	case s.reqs <- req:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runWriter is the only goroutine that writes. Each turn it takes every
// append waiting at that moment (up to maxBatch), and, while many senders
// append at once, those that come in the next moments (groupcommit.Linger),
// and commits them in one transaction, so concurrent appends share one
// fsync. It returns once Close has closed the queue and everything queued
// before is answered.
func (s *Store) runWriter(ctx context.Context) {
	defer close(s.writerDone)
	batch := make([]*appendRequest, 0, s.maxBatch)
	for req := range s.reqs {
		batch = s.fill(append(batch[:0], req))
		batch = s.linger.Gather(s.reqs, batch, s.maxBatch)
		s.commitBatch(ctx, batch)
		releaseRows(batch)
		clear(batch) // let answered requests be collected
		s.finishCheckpoint(ctx)
	}
}

// releaseRows puts back the compressed copies of a committed (or refused)
// batch's rows: SQLite copied them when it bound them, and nothing else
// reads them.
func releaseRows(batch []*appendRequest) {
	for _, req := range batch {
		for i := range req.rows {
			releaseBuffer(req.rows[i].buf)
			req.rows[i].buf, req.rows[i].stored = nil, nil
		}
	}
}

// fill adds every append waiting now to the batch, up to maxBatch.
func (s *Store) fill(batch []*appendRequest) []*appendRequest {
	for len(batch) < s.maxBatch {
		select {
		case r, ok := <-s.reqs:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// commitBatch runs a batch in one transaction and answers every caller.
// Each append is checked against what the batch has written so far, so a
// refused append fails alone and the others still commit.
func (s *Store) commitBatch(ctx context.Context, batch []*appendRequest) {
	start := time.Now()
	replies, last, err := s.runBatch(ctx, batch)
	if err != nil {
		// Nothing in the batch is durable: every append that had not been
		// refused on its own fails with the transaction's error.
		for i := range replies {
			if replies[i].err == nil {
				replies[i] = appendReply{err: fmt.Errorf("append to %s: %w", batch[i].stream, err)}
			}
		}
	} else if last > 0 {
		if deleted(batch, replies) {
			// The tail (and this very batch) may hold events that are
			// gone now: readers get this commit and what follows it
			// from the database until the tail fills again.
			s.tail.reset()
		} else {
			s.tail.add(committed(batch, replies))
		}
		s.published(last)
	}
	for i, r := range batch {
		r.reply <- replies[i]
	}
	if s.log.Enabled(ctx, slog.LevelDebug) { // its arguments would allocate for nothing
		s.log.Debug("group commit", slog.Int("appends", len(batch)), slog.Uint64("position", s.last.Load()),
			slog.Duration("took", time.Since(start)), slog.Any("error", err))
	}
}

// committed lists the events a committed batch wrote, in position order.
// The rows of one append have consecutive positions and revisions ending at
// its result; appends that wrote nothing (refused, or retries of stored
// events) are left out through their wrote flag.
func committed(batch []*appendRequest, replies []appendReply) []domain.RecordedEvent {
	var out []domain.RecordedEvent
	for i, r := range batch {
		rep := replies[i]
		if rep.err != nil || !rep.wrote {
			continue
		}
		n := uint64(len(r.rows))
		for j, row := range r.rows {
			back := n - 1 - uint64(j)
			out = append(out, domain.RecordedEvent{
				EventData: domain.EventData{ID: row.id, Type: row.typ, Data: row.data, Metadata: row.md, Payload: row.payload},
				Stream:    r.stream,
				Revision:  rep.res.NextRevision - back,
				Position:  rep.res.Position - back,
			})
		}
	}
	return out
}

// runBatch applies the batch inside one transaction and returns a reply
// for each of its appends and the highest position written (0 when nothing
// was written, in which case there is no commit and no fsync).
func (s *Store) runBatch(ctx context.Context, batch []*appendRequest) ([]appendReply, uint64, error) {
	replies := make([]appendReply, len(batch))
	st := s.stmts
	if _, err := st.begin.ExecContext(ctx); err != nil {
		return replies, 0, fmt.Errorf("begin group commit: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			// After a failed COMMIT, SQLite may have rolled back already:
			// "no transaction is active" is then the expected answer.
			_, _ = st.rollback.ExecContext(ctx)
		}
	}()
	var last uint64
	chain := s.chain
	st.chain = &chain
	leaves := s.leaves[:0]
	st.leaves = &leaves
	clear(s.pending)
	st.heads = &batchHeads{cache: s.heads, pending: s.pending}
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			replies[i].err = fmt.Errorf("append to %s: %w", r.stream, err)
			continue
		}
		rep, wrote, err := s.apply(ctx, st, r)
		if err != nil {
			return replies, 0, err
		}
		rep.wrote = wrote
		replies[i] = rep
		if wrote {
			last = rep.res.Position
			st.heads.pending[r.stream] = head{rev: rep.res.NextRevision, deleted: r.deleteStream}
		}
	}
	if last == 0 {
		return replies, 0, nil
	}
	if _, err := st.commit.ExecContext(ctx); err != nil {
		return replies, 0, fmt.Errorf("commit group: %w", err)
	}
	committed = true
	s.growTree(s.chain.position, leaves, chain)
	s.chain = chain
	s.leaves = leaves[:0]
	s.heads.commit(s.pending)
	s.commits.Add(1)
	return replies, last, nil
}

// place is where an event ID is already stored.
type place struct {
	found    bool
	stream   string
	revision uint64
	position uint64
}

// apply runs one append inside the batch's transaction. A refusal goes in
// the reply; the returned error is reserved for failures that leave the
// transaction unusable, which abort the whole batch.
//
// Most appends are new events on a new stream, so apply first just inserts
// them (fastInsert) and lets the UNIQUE indexes on id and (stream,
// revision) report the rare collision. Only then does it take the slow path,
// which looks the IDs and the stream head up to tell an idempotent retry
// from a duplicate ID or a wrong expected revision.
func (s *Store) apply(ctx context.Context, st writeStmts, r *appendRequest) (rep appendReply, wrote bool, fatal error) {
	if r.deleteStream {
		return applyDelete(ctx, st, r)
	}
	res, ok, err := fastInsert(ctx, st, r)
	if err != nil {
		return appendReply{}, false, err
	}
	if ok {
		return appendReply{res: res}, true, nil
	}
	return applyChecked(ctx, st, r)
}

// fastInsert inserts the append's events where its expected revision puts
// them, without looking for their IDs first. ok is false when that was not
// possible (a stream head that does not match, or any failed INSERT, most
// likely a UNIQUE constraint); nothing is left written then, and the caller
// decides what the append means with applyChecked. Whenever fastInsert
// succeeds, applyChecked would have written the same rows: no ID was stored
// (its index would have refused the row) and the head matched.
func fastInsert(ctx context.Context, st writeStmts, r *appendRequest) (res domain.AppendResult, ok bool, fatal error) {
	// A stream that exists has a revision 0 (a deleted stream keeps its
	// tombstone there), so for NoStream the (stream, revision) index alone
	// checks the condition.
	next := uint64(0)
	if !r.expected.IsNoStream() {
		head, exists, deleted, err := streamHead(ctx, st, r.stream, false)
		if err != nil {
			// Not a refused row: the transaction may be gone (see isConstraint).
			return domain.AppendResult{}, false, fmt.Errorf("append to %s: %w", r.stream, err)
		}
		if deleted || !r.expected.Matches(head, exists) {
			return domain.AppendResult{}, false, nil
		}
		if exists {
			next = head + 1
		}
	}
	res, err := insertAtomically(ctx, st, r.stream, next, r.rows)
	switch {
	case err == nil:
		return res, true, nil
	case isConstraint(err):
		return domain.AppendResult{}, false, nil
	default:
		return domain.AppendResult{}, false, fmt.Errorf("append to %s: %w", r.stream, err)
	}
}

// applyChecked is the careful path: it looks the event IDs up (a retry of a
// stored append gets its original result), then checks the stream head
// against the expected revision, and inserts only when both allow it.
func applyChecked(ctx context.Context, st writeStmts, r *appendRequest) (rep appendReply, wrote bool, fatal error) {
	// A failed read, unlike a refused row, may have rolled the transaction
	// back: it fails the batch (see isConstraint).
	places, err := lookupIDs(ctx, st, r.rows)
	if err != nil {
		return appendReply{}, false, fmt.Errorf("append to %s: %w", r.stream, err)
	}
	for _, p := range places {
		if p.found {
			res, err := retryResult(r, places)
			return appendReply{res: res, err: err}, false, nil
		}
	}

	head, exists, deleted, err := streamHead(ctx, st, r.stream, true)
	if err != nil {
		return appendReply{}, false, fmt.Errorf("append to %s: %w", r.stream, err)
	}
	if deleted {
		return appendReply{err: fmt.Errorf("append to %s: %w", r.stream, domain.ErrStreamDeleted)}, false, nil
	}
	if !r.expected.Matches(head, exists) {
		return appendReply{err: &domain.WrongExpectedRevisionError{Stream: r.stream, Expected: r.expected, Actual: head, Exists: exists}}, false, nil
	}
	next := uint64(0)
	if exists {
		next = head + 1
	}
	res, err := insertAtomically(ctx, st, r.stream, next, r.rows)
	switch {
	case err == nil:
		return appendReply{res: res}, true, nil
	case isConstraint(err):
		return appendReply{err: fmt.Errorf("append to %s: %w", r.stream, err)}, false, nil
	default:
		return appendReply{}, false, fmt.Errorf("append to %s: %w", r.stream, err)
	}
}

// isConstraint reports whether err is SQLite refusing a row (a UNIQUE or NOT
// NULL constraint). Such a failure undoes only its own statement; any other
// error (disk full, I/O) may have rolled back the whole transaction, so the
// batch must fail rather than go on outside it.
func isConstraint(err error) bool {
	var e *sqlitedriver.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// insertAtomically inserts rows from revision next on, all or none. One
// INSERT is atomic by itself; several go under a savepoint so a failure
// halfway takes back the earlier rows without touching the rest of the batch
// (and without leaving a gap in the positions).
func insertAtomically(ctx context.Context, st writeStmts, stream string, next uint64, rows []row) (domain.AppendResult, error) {
	if len(rows) == 1 {
		return insertRows(ctx, st, stream, next, rows)
	}
	if _, err := st.savepoint.ExecContext(ctx); err != nil {
		return domain.AppendResult{}, fmt.Errorf("savepoint: %w", err)
	}
	head, leaves := *st.chain, len(*st.leaves)
	res, err := insertRows(ctx, st, stream, next, rows)
	if err != nil {
		if _, rbErr := st.rollbackTo.ExecContext(ctx); rbErr != nil {
			return domain.AppendResult{}, fmt.Errorf("roll back append to %s: %w (after %v)", stream, rbErr, err)
		}
		// The rows and their places are taken back.
		*st.chain, *st.leaves = head, (*st.leaves)[:leaves]
	}
	if _, relErr := st.release.ExecContext(ctx); relErr != nil {
		return domain.AppendResult{}, fmt.Errorf("release savepoint: %w", relErr)
	}
	return res, err
}

func lookupIDs(ctx context.Context, st writeStmts, rows []row) ([]place, error) {
	places := make([]place, len(rows))
	for i, r := range rows {
		var rev, pos int64
		err := st.lookupID.QueryRowContext(ctx, r.id).Scan(&places[i].stream, &rev, &pos)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return nil, fmt.Errorf("look up event %s: %w", r.id, err)
		}
		places[i].found, places[i].revision, places[i].position = true, uint64(rev), uint64(pos)
	}
	return places, nil
}

// retryResult decides what an append whose IDs are (partly) stored means: the
// same events at the same place, in the same order, are a retry and get the
// original result; anything else reuses an ID elsewhere.
func retryResult(r *appendRequest, places []place) (domain.AppendResult, error) {
	first := places[0]
	for i, p := range places {
		if !p.found || p.stream != r.stream || p.revision != first.revision+uint64(i) {
			return domain.AppendResult{}, duplicateError(r, places)
		}
	}
	// Could an append with this condition have written them there?
	if !r.expected.Matches(first.revision-1, first.revision > 0) {
		return domain.AppendResult{}, duplicateError(r, places)
	}
	last := places[len(places)-1]
	return domain.AppendResult{NextRevision: last.revision, Position: last.position}, nil
}

func duplicateError(r *appendRequest, places []place) error {
	for i, p := range places {
		if p.found {
			return fmt.Errorf("append to %s (%s): event %s is already stored at %s@%d: %w",
				r.stream, r.expected, r.rows[i].id, p.stream, p.revision, domain.ErrDuplicateEventID)
		}
	}
	return fmt.Errorf("append to %s: %w", r.stream, domain.ErrDuplicateEventID)
}

// streamHead returns the last revision of stream, whether it has events and
// whether it was deleted (its only event is then its tombstone). It answers
// from the writer's heads (heads.go) unless fresh, when it reads the log.
func streamHead(ctx context.Context, st writeStmts, stream string, fresh bool) (rev uint64, exists, deleted bool, err error) {
	if !fresh {
		if h, ok := st.heads.get(stream); ok {
			return h.rev, true, h.deleted, nil
		}
	}
	var (
		r   int64
		typ string
	)
	err = st.head.QueryRowContext(ctx, stream).Scan(&r, &typ)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, false, nil
	case err != nil:
		return 0, false, false, fmt.Errorf("read head of %s: %w", stream, err)
	}
	h := head{rev: uint64(r), deleted: typ == domain.TypeStreamDeleted}
	st.heads.pending[stream] = h
	return h.rev, true, h.deleted, nil
}

func insertRows(ctx context.Context, st writeStmts, stream string, next uint64, rows []row) (domain.AppendResult, error) {
	var res domain.AppendResult
	for i, r := range rows {
		rev := next + uint64(i)
		pos, err := insertChained(ctx, st, r, stream, rev, rev)
		if err != nil {
			return domain.AppendResult{}, err
		}
		res = domain.AppendResult{NextRevision: rev, Position: pos}
	}
	return res, nil
}

// insertChained inserts one event at the position after the batch's chain
// head, with its leaf and link, stored at revision stored but chained at
// revision rev (a tombstone is stored out of the way, then settled at 0),
// and moves the head.
func insertChained(ctx context.Context, st writeStmts, r row, stream string, stored, rev uint64) (uint64, error) {
	pos := st.chain.position + 1
	d := r.digest
	d.Stream, d.Revision = stream, rev
	leaf := evidence.LeafOf(pos, d)
	link := evidence.Link(st.chain.link, leaf)
	if _, err := st.insert.ExecContext(ctx, int64(pos), r.id, stream, int64(stored), r.typ, r.stored, r.enc, r.metadata, leaf[:], link[:]); err != nil {
		return 0, fmt.Errorf("insert event %s: %w", r.id, err)
	}
	*st.chain = chainHead{position: pos, link: link}
	*st.leaves = append(*st.leaves, leaf)
	return pos, nil
}

// writeStmts are prepared once on the writer's only connection
// (Store.writeConn), where every batch's transaction runs.
type writeStmts struct {
	begin, commit, rollback        *sql.Stmt // BEGIN IMMEDIATE (see dsn), COMMIT, ROLLBACK
	lookupID, head, insert         *sql.Stmt
	savepoint, rollbackTo, release *sql.Stmt
	streamSize, deleteRows, settle *sql.Stmt // DeleteStream only
	keepLinks                      *sql.Stmt // DeleteStream only
	// chain is the batch's chain head: the position the next event takes
	// is one past it, and its link follows from it. Only an insert that
	// succeeded moves it.
	chain *chainHead
	// leaves are the leaves of the events the batch inserted, from the
	// position after the chain head it started from (for ChainTree).
	leaves *[]evidence.Hash
	// heads are the stream heads the batch sees (heads.go).
	heads *batchHeads
}

func prepareWriteStmts(ctx context.Context, conn *sql.Conn) (writeStmts, error) {
	var st writeStmts
	err := prepareAll(ctx, conn, []stmtSpec{
		{&st.begin, `BEGIN IMMEDIATE`},
		{&st.commit, `COMMIT`},
		{&st.rollback, `ROLLBACK`},
		{&st.lookupID, `SELECT stream, revision, position FROM events WHERE id = ?`},
		{&st.head, `SELECT revision, type FROM events WHERE stream = ? ORDER BY revision DESC LIMIT 1`},
		{&st.streamSize, `SELECT COUNT(*), COALESCE(MAX(revision), -1), COALESCE(MAX(position), 0) FROM events WHERE stream = ?`},
		{&st.deleteRows, `DELETE FROM events WHERE stream = ? AND position <> ?`},
		{&st.settle, `UPDATE events SET revision = 0 WHERE position = ?`},
		{&st.insert, `INSERT INTO events (position, id, stream, revision, type, data, enc, metadata, leaf, link) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.savepoint, `SAVEPOINT append_one`},
		{&st.rollbackTo, `ROLLBACK TO append_one`},
		{&st.release, `RELEASE append_one`},
		{&st.keepLinks, `INSERT INTO removed_links (position, stream, leaf, link)
			SELECT position, stream, leaf, link FROM events WHERE stream = ? AND position <> ? AND link IS NOT NULL`},
	})
	return st, err
}

func (st writeStmts) close() error {
	return closeStmts(st.begin, st.commit, st.rollback, st.lookupID, st.head, st.insert, st.savepoint, st.rollbackTo, st.release,
		st.streamSize, st.deleteRows, st.settle, st.keepLinks)
}
