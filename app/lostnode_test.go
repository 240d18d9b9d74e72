package app

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relayhq/relay/cluster"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/internal/logtest"
	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// logViews are views that read the agent sessions of one Endpoint
// straight from the log: every node's views show what the log holds once
// they have caught up, and these are always caught up.
type logViews struct {
	store      domain.EventStore
	codec      *domain.Codec
	endpointID string
}

func (v *logViews) sessions(ctx context.Context) ([]readmodel.AgentSession, error) {
	recs, err := v.store.ReadStream(ctx, domain.AgentStream(v.endpointID), 0, 1000)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []readmodel.AgentSession
	for _, r := range recs {
		if r.Type != domain.TypeAgentConnected && r.Type != domain.TypeAgentDisconnected {
			continue
		}
		e, err := v.codec.Decode(r.Type, r.Data)
		if err != nil {
			return nil, err
		}
		switch e := e.(type) {
		case domain.AgentConnected:
			out = append(out, readmodel.AgentSession{AgentID: e.AgentID, EndpointID: e.EndpointID, Target: e.Target,
				Node: e.Node, Asked: e.Primary, Filters: e.Filters, Position: r.Position})
		case domain.AgentDisconnected:
			for i, s := range out {
				if s.AgentID == e.AgentID {
					out = append(out[:i], out[i+1:]...)
					break
				}
			}
		}
	}
	return out, nil
}

func (v *logViews) OpenListeners(ctx context.Context, endpointID string) ([]readmodel.AgentSession, error) {
	if endpointID != v.endpointID {
		return nil, nil
	}
	return v.sessions(ctx)
}

func (v *logViews) OpenAgentSessions(ctx context.Context) ([]readmodel.AgentSession, error) {
	return v.sessions(ctx)
}

func (v *logViews) AgentNodes(ctx context.Context, endpointID string) ([]readmodel.NodeSessions, error) {
	ss, err := v.OpenListeners(ctx, endpointID)
	if err != nil {
		return nil, err
	}
	var out []readmodel.NodeSessions
	for _, s := range ss {
		if len(out) > 0 && out[len(out)-1].Node == s.Node {
			out[len(out)-1].Sessions++
			continue
		}
		out = append(out, readmodel.NodeSessions{Node: s.Node, Sessions: 1})
	}
	return out, nil
}

func (v *logViews) OpenAttempts(context.Context) ([]readmodel.OpenAttempt, error) { return nil, nil }

// position is the log position of the first event of stream of type typ.
func position(t *testing.T, l *logtest.Log, stream, typ string) uint64 {
	t.Helper()
	for _, r := range l.Events(t, stream) {
		if r.Type == typ {
			return r.Position
		}
	}
	t.Fatalf("no %s in %s", typ, stream)
	return 0
}

// lostNode is node a of a cluster over a real store and a real NATS
// server, whose views read the log: Endpoint ep's one session, b1, was
// started on node b, which is never heard, and a waits until b's lease
// has lapsed.
func lostNode(t *testing.T) (*clusterLink, *logtest.Log) {
	t.Helper()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	lg := &logtest.Log{Store: store, Codec: domain.NewCodec()}
	logger := slog.New(slog.DiscardHandler)
	onB := record.New(record.Config{Store: store, Codec: lg.Codec, Logger: logger, Node: "b"})
	if _, err := onB.AgentConnected(ctx, "ep", "b1", "127.0.0.1:9", false, nil); err != nil {
		t.Fatal(err)
	}

	srv := natstest.Start(t)
	conn, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	leases, err := cluster.StartLeases(conn, "a", 300*time.Millisecond, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leases.Stop)
	// b is never heard: its lease lapses one lease after a's start.
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if leases.Alive("b") {
			return errors.New("b still holds its lease")
		}
		return nil
	})

	rec := record.New(record.Config{Store: store, Codec: lg.Codec, Logger: logger, Node: "a"})
	c := &clusterLink{node: "a", leases: leases, views: &logViews{store: store, codec: lg.Codec, endpointID: "ep"},
		rec: rec, log: logger, life: ctx}
	c.hub = tunnel.NewHub(tunnel.HubConfig{Recorder: rec, Logger: logger, Node: "a", Roster: c.roster, Elsewhere: c.elsewhere})
	t.Cleanup(c.hub.Close)
	return c, lg
}

// forwardInBackground forwards cmd through c's Hub on a goroutine of its
// own and hands its outcome over; an error fails the test.
func forwardInBackground(t *testing.T, c *clusterLink, cmd domain.ForwardCommand) <-chan domain.ForwardOutcome {
	res := make(chan domain.ForwardOutcome, 1)
	go func() {
		out, err := c.hub.Forward(context.Background(), cmd)
		if err != nil {
			t.Errorf("forward: %v", err)
		}
		res <- out
	}()
	return res
}

// A delivery that comes to node a while the only session of its Endpoint
// is on node b, whose lease has lapsed and whose session's end the reaper
// has not recorded yet, is refused (503 no agent connected) only once that
// end is in the log. Before, the roster dropped b's sessions at the lapse:
// the refusal was recorded while the log showed the session open, and its
// explanation said no agent was connected although the last session had
// not ended.
func TestLostNodesSessionEndsBeforeTheRefusal(t *testing.T) {
	c, lg := lostNode(t)
	if n := c.hub.Connected("ep"); n != 1 {
		t.Errorf("Connected = %d while the log shows b's session open, want 1", n)
	}
	cmd := lg.Receive(t, "ep", "acc")
	res := forwardInBackground(t, c, cmd)
	select {
	case out := <-res:
		t.Fatalf("answered %d %q while the log showed b's session open", out.Status, out.Error)
	case <-time.After(300 * time.Millisecond):
	}

	// The reaper, here on a; on another node it is the same to a, which
	// reads the end from the log.
	if err := c.reapOnce(t.Context()); err != nil {
		t.Fatalf("reap: %v", err)
	}
	var out domain.ForwardOutcome
	select {
	case out = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("the forward still waits after b's session's end was recorded")
	}
	if out.Status != 503 || out.Error != domain.FailureNoAgent {
		t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureNoAgent)
	}
	ended := position(t, lg, domain.AgentStream("ep"), domain.TypeAgentDisconnected)
	refused := position(t, lg, domain.DeliveryStream(cmd.DeliveryID), domain.TypeForwardFailed)
	if refused < ended {
		t.Errorf("the refusal is at %d, before b's session's end at %d", refused, ended)
	}
	if n := c.hub.Connected("ep"); n != 0 {
		t.Errorf("Connected = %d once b's session's end is in the log, want 0", n)
	}
}

// A delivery waiting for a lost node's session's end is answered 503 no
// agent connected at its timeout when no end is recorded (no reaper runs,
// or the store refuses the end): the wait is bounded.
func TestLostNodesSessionWaitIsBounded(t *testing.T) {
	c, lg := lostNode(t)
	cmd := lg.Receive(t, "ep", "acc")
	cmd.Timeout = 200 * time.Millisecond
	select {
	case out := <-forwardInBackground(t, c, cmd):
		if out.Status != 503 || out.Error != domain.FailureNoAgent {
			t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureNoAgent)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forward waits for a lost node's session's end past its timeout")
	}
}

// The Hub's Close ends a forward waiting for a lost node's session's end:
// it is answered 503 relay shutting down.
func TestCloseEndsTheWaitForALostNodesSession(t *testing.T) {
	c, lg := lostNode(t)
	cmd := lg.Receive(t, "ep", "acc")
	cmd.Timeout = time.Minute
	res := forwardInBackground(t, c, cmd)
	select {
	case out := <-res:
		t.Fatalf("answered %d %q while the log showed b's session open", out.Status, out.Error)
	case <-time.After(300 * time.Millisecond):
	}
	c.hub.Close()
	select {
	case out := <-res:
		if out.Status != 503 || out.Error != domain.FailureShuttingDown {
			t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureShuttingDown)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}
