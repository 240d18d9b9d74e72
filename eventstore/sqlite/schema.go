package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// schemaVersion is stored in PRAGMA user_version; a file written by a newer
// relay is refused rather than misread.
// Version 2 deletes streams (DeleteStream): a deleted stream's rows are
// gone and its tombstone holds revision 0, which an older build would misread.
// Version 3 adds the chain (chain.go): leaf and link in every row, and
// removed_links; a log of version 2 is chained once, as it stands, when it
// is migrated.
// Version 4 adds enc (compress.go): how a row stores its data. Rows of an
// older log are raw, which is enc's default, so migrating adds the column
// and rewrites nothing.
const schemaVersion = 4

// The events table is the whole log. position is the rowid, so it is
// assigned max+1 on insert: a refused append rolls its rows back, and
// DeleteStream inserts its tombstone above the rows it removes, so
// positions only grow and are never reused; they run 1, 2, 3, … without
// gaps except where a deleted stream's events were.
// UNIQUE(stream, revision) is also the index every stream read and head
// lookup uses; UNIQUE(id) is the index idempotency checks use. It is
// exported for the floor benchmark (systemtest/floorserver), which stores
// rows as this log does.
const EventsSchema = `
CREATE TABLE IF NOT EXISTS events (
	position INTEGER PRIMARY KEY,
	id       TEXT    NOT NULL UNIQUE,
	stream   TEXT    NOT NULL,
	revision INTEGER NOT NULL,
	type     TEXT    NOT NULL,
	data     BLOB    NOT NULL,
	enc      INTEGER NOT NULL DEFAULT 0,
	metadata BLOB    NOT NULL,
	leaf     BLOB,
	link     BLOB,
	UNIQUE (stream, revision)
);
`

func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > schemaVersion {
		return fmt.Errorf("schema version %d is newer than this build's %d", version, schemaVersion)
	}
	if version == schemaVersion {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, EventsSchema+chainSchema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	// A table of an older version has no leaf and link yet.
	var chained int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'link'`).Scan(&chained); err != nil {
		return fmt.Errorf("read the events table's columns: %w", err)
	}
	if chained == 0 {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE events ADD COLUMN leaf BLOB; ALTER TABLE events ADD COLUMN link BLOB`); err != nil {
			return fmt.Errorf("add the chain's columns: %w", err)
		}
	}
	var encoded int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('events') WHERE name = 'enc'`).Scan(&encoded); err != nil {
		return fmt.Errorf("read the events table's columns: %w", err)
	}
	if encoded == 0 {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE events ADD COLUMN enc INTEGER NOT NULL DEFAULT 0`); err != nil {
			return fmt.Errorf("add the data's encoding: %w", err)
		}
	}
	head, err := readChainHead(ctx, tx)
	if err != nil {
		return err
	}
	if _, err := extendChain(ctx, tx, head); err != nil {
		return fmt.Errorf("chain the log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
