package projections

import (
	"database/sql"
	"path/filepath"
	"testing"
)

// TestValuesTuple: only an INSERT that ends in exactly one VALUES tuple is
// split (and so batched); anything else runs a row at a time.
func TestValuesTuple(t *testing.T) {
	for _, c := range []struct {
		insert, head, tuple string
		ok                  bool
	}{
		{"INSERT INTO t (a, b) VALUES (?, ?)", "INSERT INTO t (a, b) VALUES ", "(?, ?)", true},
		{"\n\tINSERT INTO t (a) VALUES (coalesce(?, 'x'))  ", "INSERT INTO t (a) VALUES ", "(coalesce(?, 'x'))", true},
		{"INSERT INTO t (a) VALUES (?), (?)", "", "", false},
		{"INSERT INTO t (a) VALUES (?) ON CONFLICT DO NOTHING", "", "", false},
		{"INSERT INTO t (a) VALUES (?", "", "", false},
		{"INSERT INTO t (a) SELECT ?", "", "", false},
		{"UPDATE t SET a = ? WHERE b IN (VALUES (1))", "", "", false},
	} {
		head, tuple, ok := valuesTuple(c.insert)
		if ok != c.ok || head != c.head || tuple != c.tuple {
			t.Errorf("valuesTuple(%q) = %q, %q, %v; want %q, %q, %v", c.insert, head, tuple, ok, c.head, c.tuple, c.ok)
		}
	}
}

// TestInsertRowsWritesEveryRowInOrder: batched or not, every row is written
// once, in order, whatever n is beside the batch size.
func TestInsertRowsWritesEveryRowInOrder(t *testing.T) {
	for _, n := range []int{0, 1, insertBatch - 1, insertBatch, insertBatch + 1, 3*insertBatch + 7} {
		for _, insert := range []string{
			"INSERT INTO t (i, sq) VALUES (?, ?)",                            // batched
			"INSERT INTO t (i, sq) SELECT ?, ?",                              // a row at a time
			"INSERT INTO t (i, sq) VALUES (?, ?) ON CONFLICT (i) DO NOTHING", // a row at a time
		} {
			path := filepath.Join(t.TempDir(), "fill.db")
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if _, err := db.Exec("CREATE TABLE t (seq INTEGER PRIMARY KEY, i INTEGER UNIQUE, sq INTEGER)"); err != nil {
				t.Fatal(err)
			}
			insertRows(t, path, insert, n, func(i int) []any { return []any{i, i * i} })
			if got := writtenRows(t, db); got != n {
				t.Errorf("%q: %d rows written, want %d", insert, got, n)
			}
		}
	}
}

// writtenRows counts the rows of t, failing unless row k is (k, k*k) in
// the order they were written.
func writtenRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	rows, err := db.Query("SELECT i, sq FROM t ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := 0
	for ; rows.Next(); got++ {
		var i, sq int
		if err := rows.Scan(&i, &sq); err != nil {
			t.Fatal(err)
		}
		if i != got || sq != got*got {
			t.Fatalf("row %d is (%d, %d), want (%d, %d)", got, i, sq, got, got*got)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
