package nodebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// cluster is two nodes over one bus and one log: back (tunnel.DefaultNode,
// e.hub) and front. Each Hub's Roster reads the agent stream as a node's
// views would, placing each session on the node named in nodes.
type cluster struct {
	*env
	front *tunnel.Hub
	nodes map[string]string // agent ID → node
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterOn(t, newEnv(t))
}

// newClusterOn is newCluster whose back node is e.
func newClusterOn(t *testing.T, e *env) *cluster {
	t.Helper()
	c := &cluster{env: e, nodes: map[string]string{}}
	logger := slog.New(slog.DiscardHandler)
	c.front = tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: c.Store, Codec: c.Codec, Logger: logger}), Logger: logger, Node: "front",
		Remote: NewClient(c.bus), Roster: c.roster,
	})
	t.Cleanup(c.front.Close)
	return c
}

// roster lists the open sessions of an Endpoint from its agent stream.
func (c *cluster) roster(endpointID string) []tunnel.RemoteSession {
	recs, err := c.Store.ReadStream(context.Background(), domain.AgentStream(endpointID), 0, 1000)
	if err != nil {
		return nil
	}
	var out []tunnel.RemoteSession
	for _, r := range recs {
		ev, err := c.Codec.Decode(r.Type, r.Data)
		if err != nil {
			return nil
		}
		switch ev := ev.(type) {
		case domain.AgentConnected:
			fs, _ := domain.ParseFilters(ev.Filters)
			out = append(out, tunnel.RemoteSession{AgentID: ev.AgentID, Node: c.nodes[ev.AgentID], Target: ev.Target,
				Asked: ev.Primary, Filters: fs, Position: r.Position, ConnectedAt: r.Metadata.OccurredAt})
		case domain.AgentDisconnected:
			for i, s := range out {
				if s.AgentID == ev.AgentID {
					out = append(out[:i], out[i+1:]...)
					break
				}
			}
		}
	}
	return out
}

func (c *cluster) listen(t *testing.T, node string, info tunnel.SessionInfo) (<-chan domain.ForwardCommand, func()) {
	t.Helper()
	info.EndpointID, info.AccountID = "ep", "acc"
	c.nodes[info.AgentID] = node
	hub := c.hub
	if node == "front" {
		hub = c.front
	}
	return agentOn(t, hub, info, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		return domain.ForwardOutcome{Status: 200, Headers: []domain.Header{}, Body: []byte(info.AgentID), DurationMs: 1}, true
	})
}

// attempts lists a delivery's attempts: agent, copy, status.
func (c *cluster) attempts(t *testing.T, deliveryID string) map[string]string {
	t.Helper()
	out := map[string]string{}
	copies := map[string]bool{}
	for _, r := range c.Events(t, domain.DeliveryStream(deliveryID)) {
		switch ev := c.Decode(t, r).(type) {
		case domain.ForwardRequested:
			copies[ev.AttemptID] = ev.Copy
		case domain.ForwardResponded:
			out[ev.AgentID] = fmt.Sprintf("copy=%v %d", copies[ev.AttemptID], ev.Status)
		case domain.ForwardFailed:
			out[ev.AgentID] = fmt.Sprintf("copy=%v %d %s", copies[ev.AttemptID], ev.Status, ev.Error)
		}
	}
	return out
}

// A delivery on the node that holds no primary goes to the primary on the
// other node (the sender gets its answer) and a copy to the session here.
func TestPrimaryOnAnotherNodeAnswersAndCopiesStayHere(t *testing.T) {
	c := newCluster(t)
	gotFront, _ := c.listen(t, "front", tunnel.SessionInfo{AgentID: "f1"})
	gotBack, _ := c.listen(t, tunnel.DefaultNode, tunnel.SessionInfo{AgentID: "b1", Primary: true})

	cmd := c.Receive(t, "ep", "acc")
	out, err := c.front.Forward(t.Context(), cmd)
	if err != nil || out.Status != 200 || string(out.Body) != "b1" || out.AgentID != "b1" {
		t.Fatalf("forward = %+v, %v; want b1's answer", out, err)
	}
	if got := recv(t, gotBack); got.AttemptID != cmd.AttemptID {
		t.Errorf("b1 got attempt %s, want %s", got.AttemptID, cmd.AttemptID)
	}
	if got := recv(t, gotFront); !got.Copy || got.AttemptID == cmd.AttemptID {
		t.Errorf("f1 got %+v, want a copy", got)
	}
	want := map[string]string{"b1": "copy=false 200", "f1": "copy=true 200"}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := c.attempts(t, cmd.DeliveryID); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("attempts %v, want %v", got, want)
		}
		return nil
	})
	ls := c.front.Listeners("ep")
	if len(ls) != 2 || ls[0].AgentID != "f1" || ls[0].IsPrimary || ls[0].Node != "front" || ls[1].AgentID != "b1" || !ls[1].IsPrimary || ls[1].Node != tunnel.DefaultNode {
		t.Errorf("listeners seen from front: %+v", ls)
	}
}

// A delivery whose primary is here gets a copy to the session on the
// other node, recorded here after the primary's outcome.
func TestCopyToASessionOnAnotherNode(t *testing.T) {
	c := newCluster(t)
	c.listen(t, "front", tunnel.SessionInfo{AgentID: "f1"})
	gotBack, _ := c.listen(t, tunnel.DefaultNode, tunnel.SessionInfo{AgentID: "b1"})

	cmd := c.Receive(t, "ep", "acc")
	out, err := c.front.Forward(t.Context(), cmd)
	if err != nil || string(out.Body) != "f1" {
		t.Fatalf("forward = %+v, %v; want f1's answer", out, err)
	}
	if got := recv(t, gotBack); !got.Copy || got.Agent != "b1" {
		t.Errorf("b1 got %+v, want a copy named for it", got)
	}
	want := map[string]string{"f1": "copy=false 200", "b1": "copy=true 200"}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := c.attempts(t, cmd.DeliveryID); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("attempts %v, want %v", got, want)
		}
		return nil
	})
	// The primary's outcome goes right after its request.
	recs := c.Events(t, domain.DeliveryStream(cmd.DeliveryID))
	if len(recs) < 3 || recs[2].Type != domain.TypeForwardResponded {
		t.Fatalf("third event of the delivery is not the primary's outcome")
	}
	if ev := c.Decode(t, recs[2]).(domain.ForwardResponded); ev.Copy || ev.AgentID != "f1" {
		t.Errorf("third event %+v, want f1's outcome", ev)
	}
}

// Filters of sessions on another node decide what is admitted here.
func TestAdmitsReadsOtherNodesFilters(t *testing.T) {
	c := newCluster(t)
	only, err := domain.ParseFilters([]string{"method=PUT"})
	if err != nil {
		t.Fatal(err)
	}
	c.listen(t, tunnel.DefaultNode, tunnel.SessionInfo{AgentID: "b1", Filters: only})
	ok, why := c.front.Admits("ep", "acc", &domain.FilterRequest{Method: "POST", Target: "/"})
	if ok || why == "" {
		t.Fatalf("Admits(POST) = %v, %q; want refused by b1's filter", ok, why)
	}
	if ok, _ := c.front.Admits("ep", "acc", &domain.FilterRequest{Method: "PUT", Target: "/"}); !ok {
		t.Error("Admits(PUT) refused")
	}
}

// When the primary leaves, the change is recorded once, whichever node
// decides, and every node's rule names the same new primary.
func TestPrimaryChangeRecordedOnceAcrossNodes(t *testing.T) {
	c := newCluster(t)
	c.listen(t, "front", tunnel.SessionInfo{AgentID: "f1"})
	_, stopB := c.listen(t, tunnel.DefaultNode, tunnel.SessionInfo{AgentID: "b1", Primary: true})
	stopB()
	var changes []domain.PrimaryChanged
	for _, r := range c.Events(t, domain.AgentStream("ep")) {
		if ev, ok := c.Decode(t, r).(domain.PrimaryChanged); ok {
			changes = append(changes, ev)
		}
	}
	want := []domain.PrimaryChanged{
		{EndpointID: "ep", AgentID: "f1", Reason: domain.PrimaryFirst},
		{EndpointID: "ep", AgentID: "b1", Previous: "f1", Reason: domain.PrimaryAsked},
		{EndpointID: "ep", AgentID: "f1", Previous: "b1", Reason: domain.PrimaryLeft},
	}
	if fmt.Sprint(changes) != fmt.Sprint(want) {
		t.Fatalf("changes %+v\nwant %+v", changes, want)
	}
	// Both nodes deciding again (a duplicate trigger) records nothing.
	rec := record.New(record.Config{Store: c.Store, Codec: c.Codec})
	for range 2 {
		if _, changed, err := rec.ReconcilePrimary(t.Context(), "ep"); err != nil || changed {
			t.Fatalf("reconcile again: changed %v, %v", changed, err)
		}
	}
	if ls := c.front.Listeners("ep"); len(ls) != 1 || !ls[0].IsPrimary {
		t.Errorf("listeners %+v", ls)
	}
}

func recv(tb testing.TB, ch <-chan domain.ForwardCommand) domain.ForwardCommand {
	tb.Helper()
	select {
	case cmd := <-ch:
		return cmd
	case <-time.After(10 * time.Second):
		tb.Fatal("the agent got no work")
		return domain.ForwardCommand{}
	}
}

// A copy for a session on a node that is lost before it answers is
// recorded as failed; the sender's answer never waited for it.
func TestCopyToALostNodeIsRecordedFailed(t *testing.T) {
	c := newCluster(t)
	c.listen(t, "front", tunnel.SessionInfo{AgentID: "f1"})
	// A session the log shows on node "gone", whose Hub takes no commands.
	c.nodes["g1"] = "gone"
	c.AppendChanges(t, domain.AgentStream("ep"), domain.Any(), []domain.Event{domain.AgentConnected{EndpointID: "ep", AgentID: "g1", Node: "gone"}}, "")

	cmd := c.Receive(t, "ep", "acc")
	out, err := c.front.Forward(t.Context(), cmd)
	if err != nil || string(out.Body) != "f1" {
		t.Fatalf("forward = %+v, %v; want f1's answer", out, err)
	}
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if c.front.NodeLost("gone") == 0 {
			return errors.New("the copy is not waiting for node gone yet")
		}
		return nil
	})
	want := map[string]string{"f1": "copy=false 200", "g1": "copy=true 503 " + tunnel.NodeLost + " (gone)"}
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := c.attempts(t, cmd.DeliveryID); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("attempts %v, want %v", got, want)
		}
		return nil
	})
}

// copyAnswerOf is the ForwardResponded recording agentID's copy of a
// delivery.
func (c *cluster) copyAnswerOf(t *testing.T, deliveryID, agentID string) (domain.ForwardResponded, bool) {
	t.Helper()
	for _, r := range c.Events(t, domain.DeliveryStream(deliveryID)) {
		if ev, ok := c.Decode(t, r).(domain.ForwardResponded); ok && ev.Copy && ev.AgentID == agentID {
			return ev, true
		}
	}
	return domain.ForwardResponded{}, false
}

// A copy answered on another node records the agent's signature verdict
// and fidelity as the same copy answered on the node the delivery reached
// does: the reply over the bus carries the verdict and the receipt.
func TestCopyOnAnotherNodeKeepsSignatureAndReceipt(t *testing.T) {
	recorded := map[string]domain.ForwardResponded{}
	for _, node := range []string{"front", tunnel.DefaultNode} {
		c := newCluster(t)
		c.listen(t, "front", tunnel.SessionInfo{AgentID: "f1"}) // the primary: the first
		c.nodes["c1"] = node
		hub := c.front
		if node != "front" {
			hub = c.hub
		}
		agentOn(t, hub, tunnel.SessionInfo{AgentID: "c1", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
			receipt := domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, cmd.Body)
			return domain.ForwardOutcome{Status: 200, Headers: []domain.Header{}, Body: []byte("c1"), DurationMs: 1,
				Signature: "github valid", Receipt: &receipt}, true
		})
		cmd := c.Receive(t, "ep", "acc")
		if out, err := c.front.Forward(t.Context(), cmd); err != nil || string(out.Body) != "f1" {
			t.Fatalf("copy on %s: forward = %+v, %v; want f1's answer", node, out, err)
		}
		testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
			ev, ok := c.copyAnswerOf(t, cmd.DeliveryID, "c1")
			if !ok {
				return errors.New("c1's copy is not recorded yet")
			}
			recorded[node] = ev
			return nil
		})
	}
	one, two := recorded["front"], recorded[tunnel.DefaultNode]
	if one.Signature != "github valid" {
		t.Errorf("copy on the node the delivery reached: signature %q, want %q", one.Signature, "github valid")
	}
	// Two deliveries of two bodies: their digests differ, their verdicts
	// may not (TestCopiesRecordTheirFidelity compares the digests).
	if one.Fidelity == nil || two.Fidelity == nil || two.Signature != one.Signature ||
		fmt.Sprint(two.Fidelity.Differences()) != fmt.Sprint(one.Fidelity.Differences()) {
		t.Errorf("copy on another node: signature %q, fidelity %v; on one node %q, %v", two.Signature, two.Fidelity, one.Signature, one.Fidelity)
	}
}

// A copy's attempt records a fidelity receipt as the primary's does: the
// relay's digests of the request it forwarded (the primary's, the same
// request) beside the copy's agent's receipt, for a copy run on the node
// the delivery reached and for one run on another node. The copy's agent
// here reports a body other than the one it was sent, so the receipt
// recorded must be its own and the relay's digests the request's.
func TestCopiesRecordTheirFidelity(t *testing.T) {
	for _, node := range []string{"front", tunnel.DefaultNode} {
		t.Run(node, func(t *testing.T) {
			c := newCluster(t)
			c.nodes["f1"] = "front"
			agentOn(t, c.front, tunnel.SessionInfo{AgentID: "f1", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				receipt := domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, cmd.Body)
				return domain.ForwardOutcome{Status: 200, Headers: []domain.Header{}, Body: []byte("f1"), DurationMs: 1, Receipt: &receipt}, true
			})
			hub := c.front
			if node != "front" {
				hub = c.hub
			}
			c.nodes["c1"] = node
			altered := func(body []byte) []byte { return append(slices.Clip(body), '!') }
			agentOn(t, hub, tunnel.SessionInfo{AgentID: "c1", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				receipt := domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, altered(cmd.Body))
				return domain.ForwardOutcome{Status: 200, Headers: []domain.Header{}, Body: []byte("c1"), DurationMs: 1, Receipt: &receipt}, true
			})
			cmd := c.Receive(t, "ep", "acc")
			if out, err := c.front.Forward(t.Context(), cmd); err != nil || string(out.Body) != "f1" {
				t.Fatalf("forward = %+v, %v; want f1's answer", out, err)
			}
			var copied domain.ForwardResponded
			testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
				ev, ok := c.copyAnswerOf(t, cmd.DeliveryID, "c1")
				if !ok {
					return errors.New("c1's copy is not recorded yet")
				}
				copied = ev
				return nil
			})
			var primary *domain.Fidelity
			for _, r := range c.Events(t, domain.DeliveryStream(cmd.DeliveryID)) {
				if ev, ok := c.Decode(t, r).(domain.ForwardResponded); ok && !ev.Copy {
					primary = ev.Fidelity
				}
			}
			sent := domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, cmd.Body)
			if primary == nil || primary.Relay != sent {
				t.Fatalf("primary's fidelity %+v, want the relay's digests %+v", primary, sent)
			}
			want := domain.Fidelity{Agent: domain.DigestRequest(cmd.Method, cmd.Target, cmd.Headers, altered(cmd.Body)), Relay: primary.Relay}
			if copied.Fidelity == nil || *copied.Fidelity != want {
				t.Fatalf("copy's fidelity %+v, want %+v", copied.Fidelity, want)
			}
			if d := copied.Fidelity.Differences(); fmt.Sprint(d) != "[body]" {
				t.Errorf("copy's fidelity differs in %v, want [body]", d)
			}
		})
	}
}

// During a rolling upgrade a node reading replies of version 3 only (its
// commands announce nothing) gets them in version 3, which its decoder
// reads; a node announcing version 4 gets the signature and receipt.
func TestReplyVersionFollowsTheCommandsAnnouncement(t *testing.T) {
	e := newEnv(t)
	receipt := domain.FidelityDigests{RequestLine: strings.Repeat("1", 64), Headers: strings.Repeat("2", 64), Body: strings.Repeat("3", 64)}
	e.agent(t, tunnel.SessionInfo{AgentID: "c1", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		return domain.ForwardOutcome{Status: 200, Headers: []domain.Header{}, Body: []byte("c1"), AgentID: "c1", Signature: "github valid", Receipt: &receipt}, true
	})
	replies, err := e.bus.pubsub.Subscribe(t.Context(), repliesTopicPrefix+"old-and-new")
	if err != nil {
		t.Fatal(err)
	}
	for _, announce := range []string{"", replyWire} {
		cp := domain.ForwardCommand{DeliveryID: "d", AttemptID: fmt.Sprintf("copy-%d", seq.Add(1)), EndpointID: "ep", AccountID: "acc",
			Method: "POST", Target: "/", Headers: []domain.Header{}, Body: []byte("{}"), Timeout: 10 * time.Second, Agent: "c1", Copy: true}
		msg := message.NewMessage(watermill.NewUUID(), encodeCommand(cp))
		middleware.SetCorrelationID(cp.AttemptID, msg)
		msg.Metadata.Set(replyToKey, repliesTopicPrefix+"old-and-new")
		if announce != "" {
			msg.Metadata.Set(replyWireKey, announce)
		}
		if err := e.bus.pubsub.Publish(commandsTopic(tunnel.DefaultNode), msg); err != nil {
			t.Fatal(err)
		}
		var payload []byte
		for payload == nil {
			select {
			case m := <-replies:
				m.Ack()
				if m.Metadata.Get(ackKey) == "" {
					payload = m.Payload
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("announcing %q: no reply", announce)
			}
		}
		if announce == "" {
			r, err := decodeReplyV3(payload)
			if err != nil || r.Outcome.Status != 200 || string(r.Outcome.Body) != "c1" {
				t.Errorf("reply to a node of version 3, read by its decoder: %+v, %v", r, err)
			}
			continue
		}
		r, err := decodeReply(payload)
		if err != nil || r.Outcome.Signature != "github valid" || r.Outcome.Receipt == nil || *r.Outcome.Receipt != receipt {
			t.Errorf("reply to a node announcing %s: %+v, %v; want the signature and receipt", announce, r, err)
		}
	}
}
