package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/relayhq/relay/evidence"
)

// The chain makes the log tamper-evident (package evidence): every event
// row carries its leaf hash and its link to the event before, computed by
// the writer before it inserts the row (it assigns positions, so it knows
// the event's place). Keeping them in the row costs no second table's page
// per commit. When retention deletes a stream, its events' positions,
// stream, leaves and links move to removed_links first, so the chain still
// verifies; nothing ever deletes from removed_links.

const chainSchema = `
CREATE TABLE IF NOT EXISTS removed_links (
	position INTEGER PRIMARY KEY,
	stream   TEXT NOT NULL,
	leaf     BLOB NOT NULL,
	link     BLOB NOT NULL
);
`

// chainHead is the newest chained event: its position (the log's last,
// where the next event goes after) and link.
type chainHead struct {
	position uint64
	link     evidence.Hash
}

// readChainHead reads the newest chained event through q.
func readChainHead(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (chainHead, error) {
	var (
		h    chainHead
		pos  int64
		link []byte
	)
	err := q.QueryRowContext(ctx, `SELECT position, link FROM events WHERE link IS NOT NULL ORDER BY position DESC LIMIT 1`).Scan(&pos, &link)
	if err == sql.ErrNoRows {
		return chainHead{}, nil
	}
	if err != nil {
		return chainHead{}, fmt.Errorf("read chain head: %w", err)
	}
	h.position = uint64(pos)
	copy(h.link[:], link)
	return h, nil
}

// extendChain links every event above head, in position order, inside tx,
// and returns the new head, reading them back a page at a time: the
// migration calls it once for a log written before the chain existed.
func extendChain(ctx context.Context, tx *sql.Tx, head chainHead) (chainHead, error) {
	const page = 1000
	for {
		events, err := queryStored(ctx, tx, "chain events", storedColumns+` WHERE position > ? ORDER BY position LIMIT ?`, int64(head.position), page)
		if err != nil {
			return head, err
		}
		for _, e := range events {
			leaf := evidence.Leaf(e)
			head = chainHead{position: e.Position, link: evidence.Link(head.link, leaf)}
			if _, err := tx.ExecContext(ctx, `UPDATE events SET leaf = ?, link = ? WHERE position = ?`,
				leaf[:], head.link[:], int64(e.Position)); err != nil {
				return head, fmt.Errorf("chain position %d: %w", e.Position, err)
			}
		}
		if len(events) < page {
			return head, nil
		}
	}
}

// storedColumns selects events as stored, for queryStored.
const storedColumns = `SELECT position, id, stream, revision, type, data, enc, metadata FROM events`

// queryStored runs a storedColumns query through q; what names it in
// errors.
func queryStored(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, what, query string, args ...any) ([]evidence.Event, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []evidence.Event
	for rows.Next() {
		var (
			e        evidence.Event
			pos, rev int64
			stored   []byte
			enc      int64
		)
		if err := rows.Scan(&pos, &e.ID, &e.Stream, &rev, &e.Type, &stored, &enc, &e.Metadata); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		data, err := decodeData(stored, enc)
		if err != nil {
			return nil, fmt.Errorf("%s: event at position %d: %w", what, pos, err)
		}
		e.Data = data
		e.Position, e.Revision = uint64(pos), uint64(rev)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// ReadChain returns up to limit links after position, in order: those of
// the events and those retention removed. A row with no link (inserted
// behind the writer's back) has none here.
func (s *Store) ReadChain(ctx context.Context, after uint64, limit int) ([]evidence.ChainLink, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT position, stream, leaf, link FROM (
		SELECT position, stream, leaf, link FROM (SELECT position, stream, leaf, link FROM events WHERE position > ?1 AND link IS NOT NULL ORDER BY position LIMIT ?2)
		UNION ALL
		SELECT position, stream, leaf, link FROM (SELECT position, stream, leaf, link FROM removed_links WHERE position > ?1 ORDER BY position LIMIT ?2)
	) ORDER BY position LIMIT ?2`, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("read chain after %d: %w", after, err)
	}
	defer rows.Close()
	var out []evidence.ChainLink
	for rows.Next() {
		var (
			l          evidence.ChainLink
			pos        int64
			leaf, link []byte
		)
		if err := rows.Scan(&pos, &l.Stream, &leaf, &link); err != nil {
			return nil, fmt.Errorf("read chain after %d: %w", after, err)
		}
		l.Position = uint64(pos)
		copy(l.Leaf[:], leaf)
		copy(l.Link[:], link)
		out = append(out, l)
	}
	return out, rows.Err()
}

// ReadStored returns up to limit events after position as stored (their
// data and metadata bytes, the data as it was given however the row keeps
// it), in position order.
func (s *Store) ReadStored(ctx context.Context, after uint64, limit int) ([]evidence.Event, error) {
	return queryStored(ctx, s.readDB, fmt.Sprintf("read events after %d", after),
		storedColumns+` WHERE position > ? ORDER BY position LIMIT ?`, int64(after), limit)
}

// ChainHead is the newest link and its position (0 for an empty log).
func (s *Store) ChainHead(ctx context.Context) (uint64, evidence.Hash, error) {
	h, err := readChainHead(ctx, s.readDB)
	return h.position, h.link, err
}

// ReadStoredStream returns up to limit events of a stream as stored, in
// revision order, or newest first when newestFirst.
func (s *Store) ReadStoredStream(ctx context.Context, stream string, limit int, newestFirst bool) ([]evidence.Event, error) {
	order := "ASC"
	if newestFirst {
		order = "DESC"
	}
	return queryStored(ctx, s.readDB, fmt.Sprintf("read stream %q", stream),
		storedColumns+` WHERE stream = ? ORDER BY revision `+order+` LIMIT ?`, stream, limit)
}

// CheckRevisions reports the streams whose revisions do not run 0, 1, 2…
// (at most limit of them) and how many streams the log holds. It reads
// the (stream, revision) index in order, so its memory does not grow with
// the log; (stream, revision) is unique, so a stream is whole when its
// revisions run from 0 to its count less one. It reads revisionPage
// streams per query: one query over a large log would keep its snapshot
// for as long as it ran, and the running relay's WAL from starting over.
func (s *Store) CheckRevisions(ctx context.Context, limit int) (int64, []string, error) {
	return s.checkRevisions(ctx, limit, revisionPage)
}

// revisionPage is how many streams one query of CheckRevisions reads.
const revisionPage = 4096

func (s *Store) checkRevisions(ctx context.Context, limit, page int) (int64, []string, error) {
	var (
		streams  int64
		problems []string
		after    string
	)
	for {
		n, last, err := s.checkRevisionsPage(ctx, after, page, limit, &problems)
		if err != nil {
			return 0, nil, err
		}
		streams += int64(n)
		if n < page {
			return streams, problems, nil
		}
		after = last
	}
}

// checkRevisionsPage reads up to page streams after the stream named
// after, adds those whose revisions are not whole to problems (while it
// holds fewer than limit), and returns how many it read and the last.
func (s *Store) checkRevisionsPage(ctx context.Context, after string, page, limit int, problems *[]string) (int, string, error) {
	rows, err := s.readDB.QueryContext(ctx, `SELECT stream, COUNT(*), MIN(revision), MAX(revision) FROM events
		WHERE stream > ? GROUP BY stream ORDER BY stream LIMIT ?`, after, page)
	if err != nil {
		return 0, "", fmt.Errorf("check revisions: %w", err)
	}
	defer rows.Close()
	var (
		n    int
		last string
	)
	for rows.Next() {
		var count, first, max int64
		if err := rows.Scan(&last, &count, &first, &max); err != nil {
			return 0, "", fmt.Errorf("check revisions: %w", err)
		}
		n++
		if (first != 0 || max != count-1) && len(*problems) < limit {
			*problems = append(*problems, fmt.Sprintf("%s: %d events with revisions %d to %d, not 0 to %d", last, count, first, max, count-1))
		}
	}
	if err := rows.Err(); err != nil {
		return 0, "", fmt.Errorf("check revisions: %w", err)
	}
	return n, last, nil
}

// chainTree is the Merkle tree over the chain's leaves up to at, whose
// link is link. Once ChainTree has built it, the writer adds each
// committed batch's leaves to it, so a checkpoint signs the tree without
// reading back every link written since the last one.
type chainTree struct {
	tree evidence.Tree
	at   uint64
	link evidence.Hash
}

func (t *chainTree) head() evidence.Head {
	return evidence.Head{Position: t.at, Link: t.link, TreeSize: t.tree.Size(), Root: t.tree.Root()}
}

// readFrom adds every link the log holds after t.at.
func (t *chainTree) readFrom(ctx context.Context, s *Store) error {
	for {
		links, err := s.ReadChain(ctx, t.at, 1000)
		if err != nil || len(links) == 0 {
			return err
		}
		for _, l := range links {
			t.tree.Add(l.Leaf)
			t.at, t.link = l.Position, l.Link
		}
	}
}

// ChainTree returns the chain's head with the Merkle tree over its leaves
// (evidence.Head), what a checkpoint signs. The first call reads the whole
// chain; the writer keeps the tree from then on.
func (s *Store) ChainTree(ctx context.Context) (evidence.Head, error) {
	s.treeMu.Lock()
	if s.tree != nil {
		h := s.tree.head()
		s.treeMu.Unlock()
		return h, nil
	}
	s.treeMu.Unlock()
	// Read the chain without holding the writer back, then, holding it,
	// what it committed meanwhile: from then on it adds every batch.
	var t chainTree
	if err := t.readFrom(ctx, s); err != nil {
		return evidence.Head{}, err
	}
	s.treeMu.Lock()
	defer s.treeMu.Unlock()
	if s.tree != nil { // another call built it meanwhile
		return s.tree.head(), nil
	}
	if err := t.readFrom(ctx, s); err != nil {
		return evidence.Head{}, err
	}
	s.tree = &t
	return t.head(), nil
}

// growTree adds a committed batch's leaves, the first at position after+1,
// to the tree if ChainTree built it. ChainTree may have read some of them
// already; a batch that does not follow the tree (which the writer never
// commits) drops it, and the next ChainTree reads it again.
func (s *Store) growTree(after uint64, leaves []evidence.Hash, head chainHead) {
	s.treeMu.Lock()
	defer s.treeMu.Unlock()
	t := s.tree
	if t == nil {
		return
	}
	for i, leaf := range leaves {
		pos := after + 1 + uint64(i)
		if pos <= t.at {
			continue
		}
		if pos != t.at+1 {
			s.tree = nil
			return
		}
		t.tree.Add(leaf)
		t.at = pos
	}
	if t.at == head.position {
		t.link = head.link
	}
}
