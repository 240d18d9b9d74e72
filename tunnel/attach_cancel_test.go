package tunnel

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/testwait"
)

// cancelAfterAppend is a store whose appends to agent streams are written,
// and then the caller's context ends before the caller hears so: a
// subscription completed while its session's start was being committed.
type cancelAfterAppend struct {
	domain.EventStore
	cancel context.CancelFunc
}

func (s cancelAfterAppend) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	res, err := s.EventStore.Append(ctx, stream, expected, events...)
	if err == nil && len(events) > 0 && events[0].Type == domain.TypeAgentConnected {
		s.cancel()
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	return res, err
}

// TestSessionEndedWhileItsStartCommitsIsEnded: a session whose
// subscription ends while its start is being written (a client that
// subscribes and completes at once) still gets its end in the log. A start
// left without an end would show the session open for good: to the primary
// rule, which could name it primary, and to the stats.
func TestSessionEndedWhileItsStartCommitsIsEnded(t *testing.T) {
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	e := newEnvWithStore(t, cancelAfterAppend{EventStore: store, cancel: cancel})
	_, _ = e.hub.Attach(ctx, SessionInfo{AgentID: "agent-1", EndpointID: "ep-1", AccountID: "acc-1", Target: "127.0.0.1:3000"})
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		recs, err := store.ReadStream(context.Background(), domain.AgentStream("ep-1"), 0, 100)
		if err != nil {
			return err
		}
		starts, ends := 0, 0
		for _, r := range recs {
			switch r.Type {
			case domain.TypeAgentConnected:
				starts++
			case domain.TypeAgentDisconnected:
				ends++
			}
		}
		if starts != 1 || ends != 1 {
			return fmt.Errorf("the agent stream holds %d starts and %d ends, want 1 and 1", starts, ends)
		}
		return nil
	})
}
