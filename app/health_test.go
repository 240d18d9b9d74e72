package app

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/projections"
)

// TestReadinessSeesStalledViews: views that do not reach a log position
// within the stall bound make the relay not ready (no error needed, a hung
// write is enough), and ready again once they catch up. The first look at
// a lag is never a stall: views always trail the log for a moment.
func TestReadinessSeesStalledViews(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	views, err := projections.Open(ctx, filepath.Join(dir, "views.db"), store, projections.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer views.Close()
	ev := domain.EventData{ID: uuid.NewString(), Type: "test.noise.v1", Data: []byte(`{}`),
		Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now()}}
	if _, err := store.Append(ctx, "noise", domain.Any(), ev); err != nil {
		t.Fatal(err)
	}
	h := &healthCheck{store: store, views: views, stall: 20 * time.Millisecond}
	if p := h.problem(ctx); p != "" {
		t.Fatalf("first look at a lag: %q, want ready", p)
	}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if !strings.Contains(h.problem(ctx), "views stalled") {
			return errors.New("still waiting for a stall")
		}
		return nil
	})
	if p := h.problem(ctx); !strings.Contains(p, "lag 1 positions") {
		t.Errorf("problem %q does not give the lag", p)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- views.Run(runCtx) }()
	defer func() { stop(); <-done }()
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if p := h.problem(ctx); p != "" {
			return errors.New("still waiting for ready again")
		}
		return nil
	})
}
