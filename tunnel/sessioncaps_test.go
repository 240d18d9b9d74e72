package tunnel

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/record"
)

// TestSessionCapsAllowASnapshot: an Endpoint's cap can never be set where
// its open sessions would stop its listener snapshots (more than
// domain.MaxSnapshotSessions open) or outgrow the views' read of its
// listeners; at the highest cap a snapshot is still taken.
func TestSessionCapsAllowASnapshot(t *testing.T) {
	if domain.MaxEndpointSessions >= domain.MaxSnapshotSessions {
		t.Errorf("domain.MaxEndpointSessions %d, not below MaxSnapshotSessions %d", domain.MaxEndpointSessions, domain.MaxSnapshotSessions)
	}
	if DefaultMaxEndpointSessions > domain.MaxEndpointSessions {
		t.Errorf("default %d above domain.MaxEndpointSessions %d", DefaultMaxEndpointSessions, domain.MaxEndpointSessions)
	}
	if c := (SessionCaps{PerEndpoint: 1 << 20}).withDefaults(); c.PerEndpoint != domain.MaxEndpointSessions {
		t.Errorf("a cap of %d taken as %d, want %d", 1<<20, c.PerEndpoint, domain.MaxEndpointSessions)
	}
	l := domain.LoadListeners(nil)
	for i := range domain.MaxEndpointSessions {
		l.Fold([]domain.Event{domain.AgentConnected{EndpointID: "ep", AgentID: fmt.Sprint(i)}})
	}
	for range domain.SnapshotAfter + 1 {
		l.Fold([]domain.Event{domain.PrimaryChanged{EndpointID: "ep", AgentID: "0"}})
	}
	if _, due := l.Snapshot("ep"); !due {
		t.Errorf("no snapshot with %d sessions open", domain.MaxEndpointSessions)
	}
}

// TestSessionCapsAcrossNodesAndAtOnce: the Endpoint's cap counts the
// sessions other nodes hold (HubConfig.Elsewhere, read from the views), and
// sessions starting at the same moment on one node never pass either cap.
func TestSessionCapsAcrossNodesAndAtOnce(t *testing.T) {
	const perEndpoint, perAccount, elsewhere = 8, 12, 3
	store := newEnv(t).Store
	logger := slog.New(slog.DiscardHandler)
	hub := NewHub(HubConfig{
		Recorder: record.New(record.Config{Store: store, Codec: domain.NewCodec(), Logger: logger}), Logger: logger,
		Elsewhere: func(endpointID string) int {
			if endpointID == "shared" {
				return elsewhere
			}
			return 0
		},
		Sessions: SessionCaps{PerEndpoint: perEndpoint, PerAccount: perAccount},
	})
	t.Cleanup(hub.Close)

	attachAll := func(endpointID string, n int) (ok, refused int) {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range n {
			wg.Go(func() {
				_, err := hub.Attach(t.Context(), SessionInfo{AgentID: fmt.Sprint(endpointID, i), EndpointID: endpointID, AccountID: "acc"})
				mu.Lock()
				defer mu.Unlock()
				var many *TooManySessionsError
				switch {
				case err == nil:
					ok++
				case errors.As(err, &many):
					refused++
				default:
					t.Errorf("attach: %v", err)
				}
			})
		}
		wg.Wait()
		return ok, refused
	}
	ok, refused := attachAll("shared", 4*perEndpoint)
	t.Logf("%d sessions at once on an Endpoint with %d on other nodes: %d attached, %d refused", 4*perEndpoint, elsewhere, ok, refused)
	if ok != perEndpoint-elsewhere || hub.local("shared") != ok {
		t.Errorf("%d attached (%d held), want %d: the cap less the other nodes' sessions", ok, hub.local("shared"), perEndpoint-elsewhere)
	}
	ok, _ = attachAll("own", 4*perEndpoint)
	if want := perAccount - (perEndpoint - elsewhere); ok != want {
		t.Errorf("%d attached on the account's second Endpoint, want %d: the rest of its cap", ok, want)
	}
}
