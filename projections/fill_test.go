package projections

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// insertRows writes n rows straight into the views file at path, in one
// transaction, through the statement insert with the arguments row gives
// the i-th: the rows a long history leaves, without replaying as many
// events through the log (the tests that count the pages a read walks).
//
// The tests that fill views files this way run in parallel with one
// another (t.Parallel, so never beside the package's other tests): each
// has its own files, and what they assert, the pages a read takes, does
// not depend on the machine's load. None of them may change a package
// variable (retentionWalk and the like): only the package's sequential
// tests do.
func insertRows(tb testing.TB, path, insert string, n int, row func(i int) []any) {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	insertRowsTx(tb, tx, insert, n, row)
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// insertBatch is how many rows one statement of insertRowsTx writes: under
// the race detector a statement costs SQLite about as much again as the
// row it inserts, so rows written insertBatch at a time fill a views file
// in about half the time (the same rows, in the same order).
const insertBatch = 50

// insertRowsTx is insertRows in the transaction tx. An insert that ends in
// one VALUES tuple writes the rows insertBatch to a statement (the tuple
// repeated); any other statement (an UPDATE, an INSERT ... SELECT) runs
// once per row.
func insertRowsTx(tb testing.TB, tx *sql.Tx, insert string, n int, row func(i int) []any) {
	tb.Helper()
	head, tuple, ok := valuesTuple(insert)
	if !ok {
		st, err := tx.Prepare(insert)
		if err != nil {
			tb.Fatal(err)
		}
		defer st.Close()
		for i := range n {
			if _, err := st.Exec(row(i)...); err != nil {
				tb.Fatal(err)
			}
		}
		return
	}
	stmts := map[int]*sql.Stmt{} // by rows per statement
	var args []any
	for i := range n {
		args = append(args, row(i)...)
		rows := i%insertBatch + 1
		if rows < insertBatch && i < n-1 {
			continue
		}
		st := stmts[rows]
		if st == nil {
			var err error
			if st, err = tx.Prepare(head + strings.Repeat(tuple+", ", rows-1) + tuple); err != nil {
				tb.Fatal(err)
			}
			defer st.Close()
			stmts[rows] = st
		}
		if _, err := st.Exec(args...); err != nil {
			tb.Fatal(err)
		}
		args = args[:0]
	}
}

// valuesTuple splits an INSERT that ends in one VALUES tuple into what
// comes before the tuple and the tuple, parentheses included.
func valuesTuple(insert string) (head, tuple string, ok bool) {
	insert = strings.TrimSpace(insert)
	i := strings.LastIndex(insert, "VALUES")
	if !strings.HasPrefix(insert, "INSERT") || i < 0 {
		return "", "", false
	}
	head, tuple = insert[:i+len("VALUES")]+" ", strings.TrimSpace(insert[i+len("VALUES"):])
	if !strings.HasPrefix(tuple, "(") {
		return "", "", false
	}
	depth := 0
	for j, c := range tuple {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 && j != len(tuple)-1 {
				return "", "", false // more than one tuple, or something after it
			}
		}
	}
	if depth != 0 {
		return "", "", false
	}
	return head, tuple, true
}

// namedRead is one read a growth test counts pages of; it returns an
// error when the read answers wrong.
type namedRead struct {
	name string
	read func(ctx context.Context) error
}

// readsDoNotGrow fills the views file at path with rows that stay for good
// in two steps, 2 000 and then 20 000 in all (fill(total, added)), counts
// the pages of the views each read takes after each step, and fails a
// read that takes more than twice as many with 20 000 as with 2 000: its
// work grows with those rows. rows names them in the messages.
func readsDoNotGrow(t *testing.T, e *env, path, rows string, fill func(total, added int), reads ...namedRead) {
	t.Helper()
	read := map[string]map[int]int{}
	for _, step := range []struct{ total, added int }{{2_000, 2_000}, {20_000, 18_000}} {
		fill(step.total, step.added)
		for _, r := range reads {
			if read[r.name] == nil {
				read[r.name] = map[int]int{}
			}
			read[r.name][step.total] = pagesReadOn(t, &e.views.r.db, path, r.read)
		}
	}
	for _, r := range reads {
		n := read[r.name]
		t.Logf("%s: %d pages with 2 000 %s, %d with 20 000", r.name, n[2_000], rows, n[20_000])
		if n[20_000] > 2*n[2_000] {
			t.Errorf("%s read %d pages of the views with 20 000 %s, %d with 2 000: the work grows with them",
				r.name, n[20_000], rows, n[2_000])
		}
	}
}
