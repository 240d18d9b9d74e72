package jetstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/natstest"
)

// TestLeaderLossStall appends to an R3 stream on three nats-server
// processes while the server that leads the stream is killed with SIGKILL,
// and logs how long appends stalled: the figures in docs/scale-out.md. It
// asserts only that every append landed (no time is asserted). Set
// RELAY_LEADER_LOSS=1 to run it: it needs Debian's nats-server and takes
// about half a minute.
func TestLeaderLossStall(t *testing.T) {
	if os.Getenv("RELAY_LEADER_LOSS") == "" {
		t.Skip("RELAY_LEADER_LOSS is not set: set it to measure an append stall when a stream leader dies")
	}
	if _, err := os.Stat(natstest.ServerBinary); err != nil {
		t.Skipf("%s is not installed (Debian: apt-get install nats-server)", natstest.ServerBinary)
	}
	c := natstest.StartProcessCluster(t, 3)
	opts := clusterOptions()
	opts.Attempt = DefaultAttempt
	if d, err := time.ParseDuration(os.Getenv("RELAY_LEADER_LOSS_ATTEMPT")); err == nil {
		opts.Attempt = d
	}
	s := openStore(t, c, opts)
	info, err := s.stream.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	leader := info.Cluster.Leader
	victim := -1
	for i := range 3 {
		if leader == fmt.Sprintf("n%d", i+1) { // natstest names its servers so
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("leader %q is none of the three servers", leader)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var longest time.Duration
	var failed int
	killed := false
	start := time.Now()
	for i := 0; time.Since(start) < 20*time.Second; i++ {
		if !killed && time.Since(start) > 2*time.Second {
			c.Kill(victim)
			killed = true
			t.Logf("killed server %d (%s), the stream's leader", victim, leader)
		}
		began := time.Now()
		actx, acancel := context.WithTimeout(ctx, 10*time.Second) // the recorder's bound
		_, err := s.Append(actx, "s-"+time.Now().Format("150405.000000"), domain.NoStream(), newEvent("e"))
		acancel()
		took := time.Since(began)
		if err != nil {
			failed++
			t.Logf("append %d failed after %s: %v", i, took, err)
			if !errors.Is(err, context.DeadlineExceeded) {
				continue
			}
		}
		if killed {
			longest = max(longest, took)
		}
	}
	t.Logf("attempt %s: longest append after the kill %s, %d failed (the recorder's 10 s bound)", opts.Attempt, longest, failed)
}
