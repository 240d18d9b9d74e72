package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// fillAgentSessions writes n agent sessions of endpoint straight into a
// views file, open or ended, positions from base on: the rows agents'
// connections leave, without replaying as many through the log.
func fillAgentSessions(tb testing.TB, path, endpoint string, base int64, n int, open bool) {
	tb.Helper()
	insertRows(tb, path, `INSERT INTO agent_sessions (agent_id, endpoint_id, target, connected_at, disconnected_at, open, position, node)
		VALUES (?, ?, 'http://127.0.0.1:3000', ?, ?, ?, ?, 'node-a')`, n, func(i int) []any {
		pos := base + int64(i)
		var ended any = pos + 1
		if open {
			ended = nil
		}
		return []any{fmt.Sprintf("%s-%v-%d", endpoint, open, i), endpoint, pos, ended, open, pos}
	})
}

// TestEndedAgentSessionsAreNotRead: the open agent sessions, which a
// node reads at start and a cluster's reaper every quarter of a lease,
// are read without the sessions that ended, which every agent's
// connection leaves for good: with 20 000 ended the read takes about as
// many pages of the views as with 2 000, and lists the same sessions.
func TestEndedAgentSessionsAreNotRead(t *testing.T) {
	t.Parallel() // see insertRows
	e := newEnv(t, Options{})
	e.sync(e.views)
	path := filepath.Join(e.dir, "views.db")
	fillAgentSessions(t, path, "ep-open", 1_000_000_000, 3, true)
	readsDoNotGrow(t, e, path, "ended sessions", func(total, added int) {
		fillAgentSessions(t, path, fmt.Sprintf("ep-%d", total), int64(total)*10, added, false)
	}, namedRead{"open agent sessions", func(ctx context.Context) error {
		open, err := e.views.OpenAgentSessions(ctx)
		if err == nil && len(open) != 3 {
			err = fmt.Errorf("listed %d open sessions, want 3", len(open))
		}
		return err
	}})
}
