package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/s2"

	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/sqlitedsn"
)

// With -storage relay the floor stores what the relay's design must store
// of a delivery, and nothing else: the log's row with the relay's schema
// (a unique event ID, a unique stream revision, the data as JSON with the
// body in base64 and, proxied, the answer's body too, s2-compressed, the
// chain's leaf and link), and a history row with the indexes the relay's
// deliveries view keeps (by ID, by address and position, by address and
// time, by provider ID), a proxied delivery's attempt row and the
// account's event index. It still leaves out everything else the relay does
// (envelopes, idempotency checks, header order, quotas, stats, GraphQL on
// the agent's socket, metrics), so its rate bounds from above what the
// relay can reach with its storage on this machine.

// drops are the parts of the relay's storage -drop leaves out, to measure
// what each costs: the chain's leaf and link (chain), the data as JSON with
// the bodies in base64 rather than the bodies as they are (json), its
// compression (s2), the log's unique index of event IDs (id-index), the
// history's indexes besides its key and address (view-indexes), the
// account's event index (account-index), a proxied delivery's attempt row
// (attempt), or the whole view (view).
type drops struct {
	chain, json, s2, idIndex, viewIndexes, accountIndex, attempt, view bool
}

var dropParts = []string{"chain", "json", "s2", "id-index", "view-indexes", "account-index", "attempt", "view"}

func parseDrops(list string) (drops, error) {
	var d drops
	for _, part := range strings.Split(list, ",") {
		switch part {
		case "":
		case "chain":
			d.chain = true
		case "json":
			d.json = true
		case "s2":
			d.s2 = true
		case "id-index":
			d.idIndex = true
		case "view-indexes":
			d.viewIndexes = true
		case "account-index":
			d.accountIndex = true
		case "attempt":
			d.attempt = true
		case "view":
			d.view = true
		default:
			return drops{}, fmt.Errorf("-drop %q: want some of %s", part, strings.Join(dropParts, ", "))
		}
	}
	return d, nil
}

// relayLogSchema is the relay's log table itself (without its unique index
// of event IDs for id-index); relayViewSchema keeps the indexes of the
// relay's deliveries, attempts and account_events views
// (projections/schema.go) with fewer columns (without those besides the
// key and the address for view-indexes).
func relayLogSchema(d drops) string {
	if d.idIndex {
		return strings.Replace(sqlite.EventsSchema, "id       TEXT    NOT NULL UNIQUE,", "id       TEXT    NOT NULL,", 1)
	}
	return sqlite.EventsSchema
}

func relayViewSchema(d drops) string {
	if !d.viewIndexes {
		return relayViewSchemaAll
	}
	s := relayViewSchemaAll
	for _, cut := range []string{
		"CREATE INDEX IF NOT EXISTS history_by_received ON history (address, received_at);",
		"CREATE INDEX IF NOT EXISTS history_by_provider_id ON history (address, provider_delivery_id)\n\tWHERE provider_delivery_id IS NOT NULL;",
		"UNIQUE (delivery_position, attempt_id)",
	} {
		s = strings.Replace(s, cut, "", 1)
	}
	s = strings.Replace(s, "outcome_position  INTEGER,\n", "outcome_position  INTEGER\n", 1)
	return strings.Replace(s, "id            TEXT NOT NULL UNIQUE,", "id            TEXT NOT NULL,", 1)
}

const relayViewSchemaAll = `
CREATE TABLE IF NOT EXISTS history (
	position      INTEGER PRIMARY KEY,
	id            TEXT NOT NULL UNIQUE,
	address       TEXT NOT NULL,
	account_id    TEXT NOT NULL,
	method        TEXT NOT NULL,
	target        TEXT NOT NULL,
	body_size     INTEGER NOT NULL,
	received_at   INTEGER NOT NULL,
	status        INTEGER,
	stream        TEXT NOT NULL,
	stored_bytes  INTEGER NOT NULL,
	provider_delivery_id TEXT
);
CREATE INDEX IF NOT EXISTS history_by_address ON history (address, position);
CREATE INDEX IF NOT EXISTS history_by_received ON history (address, received_at);
CREATE INDEX IF NOT EXISTS history_by_provider_id ON history (address, provider_delivery_id)
	WHERE provider_delivery_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS attempts (
	position          INTEGER PRIMARY KEY,
	delivery_position INTEGER NOT NULL,
	attempt_id        TEXT NOT NULL,
	started_at        INTEGER NOT NULL,
	status            INTEGER,
	outcome_position  INTEGER,
	UNIQUE (delivery_position, attempt_id)
);
CREATE TABLE IF NOT EXISTS account_events (
	account_id TEXT    NOT NULL,
	position   INTEGER NOT NULL,
	stream     TEXT    NOT NULL,
	revision   INTEGER NOT NULL,
	PRIMARY KEY (account_id, position)
) WITHOUT ROWID`

// relayLog keeps the chain's head for the writer, and what it leaves out.
type relayLog struct {
	link evidence.Hash
	drop drops
}

func openRelayLog(ctx context.Context, dir string, d drops) (*eventLog, error) {
	logDB, err := openDB(ctx, filepath.Join(dir, "log.db"), sqlitedsn.Full, relayLogSchema(d))
	if err != nil {
		return nil, err
	}
	viewDB, err := openDB(ctx, filepath.Join(dir, "view.db"), sqlitedsn.Normal, relayViewSchema(d))
	if err != nil {
		return nil, err
	}
	history, index, attempt, err := prepareRelayView(ctx, viewDB)
	if err != nil {
		return nil, err
	}
	l := &eventLog{queue: make(chan *record, 4096), view: make(chan []*record, 64), named: true}
	rl := &relayLog{drop: d}
	go l.write(ctx, logDB, `INSERT INTO events (position, id, stream, revision, type, data, enc, metadata, leaf, link) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, rl.row)
	go l.project(ctx, func(batch []*record) error {
		if d.view {
			return nil
		}
		return applyRelay(ctx, viewDB, history, index, attempt, batch, d)
	})
	return l, nil
}

// row encodes r as the relay's log stores an event and chains it.
func (rl *relayLog) row(r *record) []any {
	data := r.encode()
	if rl.drop.json {
		data = append(append([]byte{}, r.body...), r.answer...)
	}
	enc := 0
	if len(data) >= 256 && !rl.drop.s2 {
		if c := s2.Encode(nil, data); len(c) < len(data)-len(data)/8 {
			data, enc = c, 1
		}
	}
	meta := []byte(`{"correlation_id":"` + r.stream + `","causation_id":"` + r.id + `"}`)
	r.stored = len(data)
	if rl.drop.chain {
		return []any{int64(r.pos), r.id, r.stream, r.rev, r.kind, data, enc, meta, nil, nil}
	}
	leaf := evidence.Leaf(evidence.Event{Position: r.pos, ID: r.id, Stream: r.stream, Revision: uint64(r.rev), Type: r.kind, Data: data, Metadata: meta})
	rl.link = evidence.Link(rl.link, leaf)
	link := rl.link
	return []any{int64(r.pos), r.id, r.stream, r.rev, r.kind, data, enc, meta, leaf[:], link[:]}
}

// encode is the event's data: JSON with the headers and the body in base64,
// as the relay's receipt carries them.
func (r *record) encode() []byte {
	b := make([]byte, 0, 256+len(r.headers)+base64.StdEncoding.EncodedLen(len(r.body)+len(r.answer)))
	b = append(b, `{"method":`...)
	b = strconv.AppendQuote(b, r.method)
	b = append(b, `,"target":`...)
	b = strconv.AppendQuote(b, r.target)
	b = append(b, `,"headers":`...)
	b = strconv.AppendQuote(b, string(r.headers))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, `,"received_at":`...)
	b = strconv.AppendInt(b, r.at, 10)
	b = append(b, `,"body":"`...)
	b = base64.StdEncoding.AppendEncode(b, r.body)
	if r.answer != nil {
		b = append(b, `","response_body":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.answer)
	}
	return append(b, `"}`...)
}

// prepareRelayView prepares the view's three inserts.
func prepareRelayView(ctx context.Context, db *sql.DB) (history, index, attempt *sql.Stmt, err error) {
	for _, p := range []struct {
		dst   **sql.Stmt
		query string
	}{
		{&history, `INSERT INTO history (position, id, address, account_id, method, target, body_size, received_at, status, stream, stored_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&index, `INSERT INTO account_events (account_id, position, stream, revision) VALUES (?, ?, ?, ?)`},
		{&attempt, `INSERT INTO attempts (position, delivery_position, attempt_id, started_at, status, outcome_position) VALUES (?, ?, ?, ?, ?, ?)`},
	} {
		if *p.dst, err = db.PrepareContext(ctx, p.query); err != nil {
			return nil, nil, nil, fmt.Errorf("prepare %q: %w", p.query, err)
		}
	}
	return history, index, attempt, nil
}

func applyRelay(ctx context.Context, db *sql.DB, history, index, attempt *sql.Stmt, batch []*record, d drops) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	h, ix, at := tx.StmtContext(ctx, history), tx.StmtContext(ctx, index), tx.StmtContext(ctx, attempt)
	for _, r := range batch {
		if _, err := h.ExecContext(ctx, int64(r.pos), r.id, r.address, "account", r.method, r.target, len(r.body), r.at, r.status, r.stream, r.stored); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if !d.accountIndex {
			if _, err := ix.ExecContext(ctx, "account", int64(r.pos), r.stream, r.rev); err != nil {
				return fmt.Errorf("account index: %w", err)
			}
		}
		if r.answer != nil && !d.attempt { // a proxied delivery and its one attempt
			if _, err := at.ExecContext(ctx, int64(r.pos), int64(r.pos), r.id, r.at, r.status, int64(r.pos)); err != nil {
				return fmt.Errorf("attempt: %w", err)
			}
		}
	}
	return tx.Commit()
}

// newDelivery names a delivery as the relay does: a time-ordered ID and
// its stream.
func newDelivery(r *record) {
	id := uuid.Must(uuid.NewV7()).String()
	r.id, r.stream, r.at = id, "delivery-"+id, time.Now().UnixNano()
}
