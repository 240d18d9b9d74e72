package projections

import (
	"context"
	"database/sql"
	"fmt"
)

// schemaVersion is stored in PRAGMA user_version. A views file written by
// another version is dropped and rebuilt from the log on Open: views are
// disposable, the log is the truth.
const schemaVersion = 1

// viewTables lists every table the package owns, for Rebuild and tests.
var viewTables = []string{
	"checkpoint", "inspectors", "accounts", "tokens", "endpoints",
	"agent_sessions", "deliveries", "delivery_bodies", "delivery_responses", "attempts",
}

// Times are INTEGER Unix nanoseconds (UTC) so they sort and compare exactly.
// Positions are INTEGER; deliveries and attempts use the position of the
// event that created them as rowid, which gives history its order for free.
const schemaSQL = `
CREATE TABLE IF NOT EXISTS checkpoint (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	position INTEGER NOT NULL
);
INSERT OR IGNORE INTO checkpoint (id, position) VALUES (1, 0);

CREATE TABLE IF NOT EXISTS inspectors (
	id               TEXT PRIMARY KEY,
	created_at       INTEGER NOT NULL,
	last_activity_at INTEGER NOT NULL,
	ttl_ms           INTEGER NOT NULL,
	expired          INTEGER NOT NULL DEFAULT 0,
	position         INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS accounts (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	position   INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS tokens (
	hash       TEXT PRIMARY KEY,
	token_id   TEXT NOT NULL,
	account_id TEXT NOT NULL,
	revoked    INTEGER NOT NULL DEFAULT 0,
	issued_at  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_by_id ON tokens (account_id, token_id);

CREATE TABLE IF NOT EXISTS endpoints (
	id               TEXT PRIMARY KEY,
	account_id       TEXT NOT NULL,
	name             TEXT NOT NULL,
	mode             TEXT NOT NULL,
	target           TEXT NOT NULL,
	response_capture INTEGER NOT NULL,
	created_at       INTEGER NOT NULL,
	last_activity_at INTEGER NOT NULL,
	deleted          INTEGER NOT NULL DEFAULT 0,
	position         INTEGER NOT NULL,
	updated_position INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS endpoints_by_account ON endpoints (account_id, position);

CREATE TABLE IF NOT EXISTS agent_sessions (
	agent_id        TEXT PRIMARY KEY,
	endpoint_id     TEXT NOT NULL,
	target          TEXT NOT NULL,
	connected_at    INTEGER NOT NULL,
	disconnected_at INTEGER,
	reason          TEXT NOT NULL DEFAULT '',
	open            INTEGER NOT NULL,
	position        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_sessions_by_endpoint ON agent_sessions (endpoint_id, open);

-- Bodies live in tables of their own, written once: updating a delivery's
-- status then never rewrites a body of up to the capture cap.
CREATE TABLE IF NOT EXISTS deliveries (
	position          INTEGER PRIMARY KEY,
	id                TEXT NOT NULL UNIQUE,
	address           TEXT NOT NULL,
	kind              TEXT NOT NULL,
	account_id        TEXT NOT NULL,
	method            TEXT NOT NULL,
	target            TEXT NOT NULL,
	host              TEXT NOT NULL,
	proto             TEXT NOT NULL,
	remote_addr       TEXT NOT NULL,
	headers           TEXT NOT NULL,
	body_size         INTEGER NOT NULL,
	complete          INTEGER NOT NULL,
	received_at       INTEGER NOT NULL,
	answered_status   INTEGER,
	response_status   INTEGER,
	updated_position  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS deliveries_by_address ON deliveries (address, position);

CREATE TABLE IF NOT EXISTS delivery_bodies (
	delivery_position INTEGER PRIMARY KEY,
	body              BLOB NOT NULL
);

-- The latest local response of a delivery (one row once it has one).
CREATE TABLE IF NOT EXISTS delivery_responses (
	delivery_position INTEGER PRIMARY KEY,
	headers           TEXT NOT NULL,
	captured          INTEGER NOT NULL,
	body              BLOB
);

CREATE TABLE IF NOT EXISTS attempts (
	position          INTEGER PRIMARY KEY,
	delivery_position INTEGER NOT NULL,
	attempt_id        TEXT NOT NULL,
	retry             INTEGER NOT NULL,
	started_at        INTEGER NOT NULL,
	status            INTEGER,
	duration_ms       INTEGER,
	error             TEXT NOT NULL DEFAULT '',
	outcome_position  INTEGER,
	UNIQUE (delivery_position, attempt_id)
);
`

// migrate creates the schema, dropping views written by another schema
// version first. It returns whether the views were reset.
func migrate(ctx context.Context, db *sql.DB) (reset bool, err error) {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if version != 0 && version != schemaVersion {
		if err := dropViews(ctx, tx); err != nil {
			return false, err
		}
		reset = true
	}
	if err := createViews(ctx, tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit migration: %w", err)
	}
	return reset, nil
}

func createViews(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("create views: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return nil
}

func dropViews(ctx context.Context, tx *sql.Tx) error {
	for _, t := range viewTables {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return fmt.Errorf("drop %s: %w", t, err)
		}
	}
	return nil
}
