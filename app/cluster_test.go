package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
)

// A node whose bus connection is down says so, so /readyz takes it out of
// its load balancer's rotation until the connection is back.
func TestBusProblem(t *testing.T) {
	srv := natstest.Start(t)
	conn, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if p := busProblem(conn); p != "" {
		t.Fatalf("connected bus: %q", p)
	}
	srv.Shutdown()
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if p := busProblem(conn); !strings.HasPrefix(p, "bus to the other relay nodes is ") {
			return fmt.Errorf("bus without a server: %q", p)
		}
		return nil
	})
	h := &healthCheck{bus: func() string { return busProblem(conn) }}
	if p := h.problem(t.Context()); !strings.Contains(p, "bus") {
		t.Fatalf("readiness without a bus: %q", p)
	}
}
