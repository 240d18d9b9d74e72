package projections

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestOpenRebuildsViewsOfAnOlderSchema opens a views file written by schema
// version 1, which copied bodies into tables of their own: Open drops every
// view (the retired tables too), gives their pages back, and Run rebuilds
// the views from the log.
func TestOpenRebuildsViewsOfAnOlderSchema(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-1", time.Hour, t0))
	e.must(e.receive(e.ctx, "d-1", "insp-1", domain.AddressInspector, "", request("/old", "the body"), t0))
	e.sync(e.views)
	want := histories(t, e.views)
	e.stop()
	if err := e.views.Close(); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(e.dir, "views.db")
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE delivery_bodies (delivery_position INTEGER PRIMARY KEY, body BLOB NOT NULL)",
		"INSERT INTO delivery_bodies VALUES (1, zeroblob(1048576))",
		"CREATE TABLE delivery_responses (delivery_position INTEGER PRIMARY KEY, headers TEXT NOT NULL, captured INTEGER NOT NULL, body BLOB)",
		"PRAGMA user_version = 1",
	} {
		if _, err := db.ExecContext(e.ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	v := e.open("views.db", Options{})
	if v.Position() != 0 {
		t.Errorf("reopened at position %d, want 0: the old views were kept", v.Position())
	}
	var tables []string
	rows, err := v.r.QueryContext(e.ctx, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	if got := strings.Join(tables, " "); strings.Contains(got, "delivery_bodies") || strings.Contains(got, "delivery_responses") {
		t.Errorf("tables after the upgrade: %s", got)
	}
	var free int
	if err := v.r.QueryRowContext(e.ctx, "PRAGMA freelist_count").Scan(&free); err != nil || free != 0 {
		t.Errorf("%d free pages after the upgrade (%v): the dropped bodies still take room", free, err)
	}
	e.run(v)
	e.sync(v)
	compareHistories(t, "rebuilt after the upgrade", want, histories(t, v))
}
