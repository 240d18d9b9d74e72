package projections

import (
	"database/sql"
	"testing"
)

// insertRows writes n rows straight into the views file at path, in one
// transaction, through the statement insert with the arguments row gives
// the i-th: the rows a long history leaves, without replaying as many
// events through the log (the tests that count the pages a read walks).
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
	st, err := tx.Prepare(insert)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if _, err := st.Exec(row(i)...); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}
