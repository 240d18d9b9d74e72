package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/relayhq/relay/cluster"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
	"github.com/relayhq/relay/tunnel/nodebus"
)

// presenceRead bounds one read of where an Endpoint's sessions are.
const presenceRead = 2 * time.Second

// clusterLink is this node's part in a cluster: the bus to the other
// nodes, its lease, and the Hub that routes over them.
type clusterLink struct {
	node   string
	bus    *nodebus.Bus
	leases *cluster.Leases
	hub    *tunnel.Hub
	views  interface {
		AgentNodes(ctx context.Context, endpointID string) ([]readmodel.NodeSessions, error)
		OpenListeners(ctx context.Context, endpointID string) ([]readmodel.AgentSession, error)
		OpenAgentSessions(ctx context.Context) ([]readmodel.AgentSession, error)
		OpenAttempts(ctx context.Context) ([]readmodel.OpenAttempt, error)
	}
	rec     *record.Recorder
	log     *slog.Logger
	life    context.Context
	stop    context.CancelFunc
	busDone chan error
}

// joinCluster connects to the bus, starts this node's lease and builds a
// Hub that applies the primary rule to the sessions of every node holding
// its lease, found in the views (agent sessions record their node), and
// sends a forward to the node holding the primary, copies to the others.
func joinCluster(ctx context.Context, cfg Config, a *App, log *slog.Logger) (*clusterLink, error) {
	lease := cfg.NodeLease
	if lease <= 0 {
		lease = cluster.DefaultLease
	}
	bus, err := nodebus.NewNATSBus(log, cfg.Bus, "relay "+a.node, nodebus.PendingBytes(a.bodies.Total()))
	if err != nil {
		return nil, err
	}
	if max := bus.MaxPayload(); max > 0 && cfg.Ingress.MaxBody > max {
		log.Warn("the bus's NATS servers carry smaller messages than --max-body: larger proxied requests crossing nodes fail with 503",
			"max_payload", max, "max_body", cfg.Ingress.MaxBody)
	}
	leases, err := cluster.StartLeases(bus.Conn(), a.node, lease, log)
	if err != nil {
		return nil, errors.Join(err, bus.Close())
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &clusterLink{node: a.node, bus: bus, leases: leases, views: a.views, rec: a.rec, log: log,
		life: life, stop: stop, busDone: make(chan error, 1)}
	c.hub = tunnel.NewHub(tunnel.HubConfig{
		Recorder: a.rec, Logger: log, Node: a.node,
		Remote: nodebus.NewClient(bus), Elsewhere: c.elsewhere, Roster: c.roster,
		Bodies: a.bodies, Sessions: cfg.Sessions,
	})
	nodebus.Serve(bus, c.hub)
	leases.OnLapse(func(node string) {
		if n := c.hub.NodeLost(node); n > 0 {
			log.Warn("forwards sent to a lost relay node answered 503", "node", node, "attempts", n)
		}
	})
	go func() { c.busDone <- bus.Run(life) }()
	select {
	case <-bus.Running():
	case err := <-c.busDone:
		leases.Stop()
		stop()
		return nil, errors.Join(fmt.Errorf("start bus: %w", err), bus.Close())
	case <-ctx.Done():
		c.close()
		return nil, ctx.Err()
	}
	log.Info("joined the relay cluster", "node", a.node, "lease", lease)
	return c, nil
}

// serving lists the other nodes holding sessions of an Endpoint, as the
// views show them: a lost node's too, until the reaper has recorded their
// ends, as the roster shows them (ending).
func (c *clusterLink) serving(endpointID string) []readmodel.NodeSessions {
	ctx, cancel := context.WithTimeout(c.life, presenceRead)
	defer cancel()
	nodes, err := c.views.AgentNodes(ctx, endpointID)
	if err != nil {
		c.log.Error("read where an Endpoint's agents are", "endpoint_id", endpointID, "error", err)
		return nil
	}
	out := nodes[:0]
	for _, n := range nodes {
		if n.Node != "" && n.Node != c.node {
			out = append(out, n)
		}
	}
	return out
}

// elsewhere counts the sessions of an Endpoint the other nodes hold, as
// the log shows them open.
func (c *clusterLink) elsewhere(endpointID string) int {
	n := 0
	for _, s := range c.serving(endpointID) {
		n += s.Sessions
	}
	return n
}

// roster lists an Endpoint's open sessions on every node, as the views
// show them: the primary rule, the filters and Endpoint.listeners read them
// for every node. Those of a node whose lease lapsed are marked Ending:
// they take no work, and a delivery no other session takes waits until
// the reaper (on whichever node leads) has recorded their ends and the
// views show them closed, so its 503 no agent connected comes after those
// ends in the log. Dropped at the lapse instead, they left the delivery
// refused while the log still showed them open.
func (c *clusterLink) roster(endpointID string) []tunnel.RemoteSession {
	ctx, cancel := context.WithTimeout(c.life, presenceRead)
	defer cancel()
	sessions, err := c.views.OpenListeners(ctx, endpointID)
	if err != nil {
		c.log.Error("read an Endpoint's listeners", "endpoint_id", endpointID, "error", err)
		return nil
	}
	out := make([]tunnel.RemoteSession, 0, len(sessions))
	for _, s := range sessions {
		if s.Node == "" {
			continue
		}
		r := tunnel.RemoteSession{AgentID: s.AgentID, Node: s.Node, Target: s.Target, Asked: s.Asked,
			Position: s.Position, ConnectedAt: s.ConnectedAt, Ending: s.Node != c.node && !c.leases.Alive(s.Node)}
		for _, text := range s.Filters {
			f, err := domain.ParseFilter(text)
			if err != nil {
				// Recorded by a node that accepted it: a newer filter kind.
				c.log.Warn("a listener's filter this node cannot read", "agent_id", s.AgentID, "filter", text, "error", err)
				continue
			}
			r.Filters = append(r.Filters, f)
		}
		out = append(out, r)
	}
	return out
}

// reap closes, on one live node at a time (the first by name), the agent
// sessions of nodes whose lease lapsed and fails the attempts their senders
// waited for: those senders went with their node. It runs until ctx ends.
func (c *clusterLink) reap(ctx context.Context) {
	tick := time.NewTicker(c.leaseCheck())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !c.leases.Leader() {
			continue
		}
		if err := c.reapOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("close the sessions of lost relay nodes", "error", err)
		}
	}
}

func (c *clusterLink) leaseCheck() time.Duration {
	lease := c.leases.Lease()
	return max(lease/4, 50*time.Millisecond)
}

func (c *clusterLink) reapOnce(ctx context.Context) error {
	lost := func(node string) bool { return node != "" && node != c.node && !c.leases.Alive(node) }
	return recoverGone(ctx, c.views, c.hub, c.rec, c.log, lost, nodeLost)
}

// problem says why this node cannot reach the other nodes: its bus
// connection is down (it reconnects by itself), so forwards between nodes
// and heartbeats stop. "" when it can.
func (c *clusterLink) problem() string {
	return busProblem(c.bus.Conn())
}

func busProblem(conn *nats.Conn) string {
	if conn.IsConnected() {
		return ""
	}
	return "bus to the other relay nodes is " + strings.ToLower(conn.Status().String())
}

// close stops the lease (the others notice one lease later) and the bus.
// Call it after the Hub's Close.
func (c *clusterLink) close() {
	c.leases.Stop()
	c.stop()
	if err := <-c.busDone; err != nil && !errors.Is(err, context.Canceled) {
		c.log.Error("bus stopped", "error", err)
	}
	if err := c.bus.Close(); err != nil {
		c.log.Error("close bus", "error", err)
	}
}
