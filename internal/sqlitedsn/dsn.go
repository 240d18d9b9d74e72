package sqlitedsn

import "net/url"

// Sync is SQLite's synchronous pragma.
type Sync string

const (
	// Full fsyncs every commit: what the event log needs, since an
	// acknowledged append must survive a power cut.
	Full Sync = "FULL"
	// Normal fsyncs at WAL checkpoints: enough for data that can be rebuilt.
	Normal Sync = "NORMAL"
)

// Build returns a file: URI (so any path, with spaces, '?' or '#', opens as
// given) with the pragmas every connection gets: WAL so readers never block
// the writer, the given synchronous level, and a busy timeout for the rare
// moment a checkpoint holds a lock. Writers begin IMMEDIATE so a transaction
// never has to upgrade its lock halfway; readers are query-only. pragmas
// are more of them, each as the _pragma parameter takes it ("name(value)").
func Build(path string, readOnly bool, sync Sync, pragmas ...string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+string(sync)+")")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	return u.String()
}
