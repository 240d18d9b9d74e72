package sqlitedsn

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestBuildOpensThePathAsGiven checks that awkward file names open exactly
// where asked, and that writers and readers get the pragmas Build promises.
func TestBuildOpensThePathAsGiven(t *testing.T) {
	tests := []struct {
		name, file string
		sync       Sync
		wantSync   string // PRAGMA synchronous: FULL is 2, NORMAL is 1
	}{
		{"plain", "events.db", Full, "2"},
		{"space", "my events.db", Normal, "1"},
		{"question mark", "what?.db", Full, "2"},
		{"hash", "#1.db", Normal, "1"},
		{"percent", "100%.db", Full, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), tt.file)
			w, err := sql.Open("sqlite", Build(path, false, tt.sync))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if _, err := w.ExecContext(ctx, `CREATE TABLE t (x)`); err != nil {
				t.Fatalf("write: %v", err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the file is not at %q: %v", path, err)
			}
			pragmas := map[string]string{"journal_mode": "wal", "synchronous": tt.wantSync, "busy_timeout": "10000", "query_only": "0"}
			checkPragmas(t, w, pragmas)

			r, err := sql.Open("sqlite", Build(path, true, tt.sync))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			pragmas["query_only"] = "1"
			checkPragmas(t, r, pragmas)
			if _, err := r.ExecContext(ctx, `INSERT INTO t VALUES (1)`); err == nil {
				t.Fatal("a read-only connection could write")
			}
		})
	}
}

func checkPragmas(t *testing.T, db *sql.DB, want map[string]string) {
	t.Helper()
	for pragma, w := range want {
		var got string
		if err := db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		if got != w {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, w)
		}
	}
}

// TestBuildAddsPragmas checks that the extra pragmas reach the connection.
func TestBuildAddsPragmas(t *testing.T) {
	for _, tt := range []struct {
		pragmas []string
		want    string // PRAGMA temp_store: 0 default, 2 memory
	}{{nil, "0"}, {[]string{"temp_store(MEMORY)"}, "2"}} {
		db, err := sql.Open("sqlite", Build(filepath.Join(t.TempDir(), "p.db"), false, Normal, tt.pragmas...))
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := db.QueryRowContext(t.Context(), "PRAGMA temp_store").Scan(&got); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if got != tt.want {
			t.Errorf("pragmas %q: temp_store = %s, want %s", tt.pragmas, got, tt.want)
		}
	}
}
