package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayhq/relay/internal/sqlitedsn"
)

// TestDropsLeaveOutTheirIndexes: each part -drop names is parsed, the
// schemas it leaves are valid, and the indexes it names are gone from
// them (and only those); an unknown part is refused.
func TestDropsLeaveOutTheirIndexes(t *testing.T) {
	for _, tc := range []struct {
		drop             string
		logIndexes, view int // indexes SQLite keeps besides the tables' keys
		wantErr          bool
	}{
		{drop: "", logIndexes: 2, view: 5},
		{drop: "id-index", logIndexes: 1, view: 5},
		{drop: "view-indexes", logIndexes: 2, view: 1},
		{drop: "chain,json,s2,account-index,attempt,view", logIndexes: 2, view: 5},
		{drop: "views", wantErr: true},
	} {
		t.Run(tc.drop, func(t *testing.T) {
			d, err := parseDrops(tc.drop)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "want some of") {
					t.Fatalf("-drop %q: %v, want it refused", tc.drop, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, db := range []struct {
				name, schema string
				want         int
			}{{"log.db", relayLogSchema(d), tc.logIndexes}, {"view.db", relayViewSchema(d), tc.view}} {
				h, err := openDB(t.Context(), filepath.Join(t.TempDir(), db.name), sqlitedsn.Normal, db.schema)
				if err != nil {
					t.Fatal(err)
				}
				var n int
				if err := h.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'index'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				h.Close()
				if n != db.want {
					t.Errorf("-drop %q: %s keeps %d indexes, want %d", tc.drop, db.name, n, db.want)
				}
			}
		})
	}
}
