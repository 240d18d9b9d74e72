package nodebus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// countingBus is the bus's Pub/Sub counting the commands published: the
// attempts sent and their bytes, once per attempt (a resend is the same
// bytes again).
type countingBus struct {
	pubSub
	mu    sync.Mutex
	sent  map[string]int64 // attempt ID → bytes
	bytes int64
}

func (c *countingBus) Publish(topic string, msgs ...*message.Message) error {
	if strings.HasPrefix(topic, commandsTopicPrefix) {
		c.mu.Lock()
		for _, m := range msgs {
			id := middleware.MessageCorrelationID(m)
			if _, again := c.sent[id]; !again {
				c.sent[id] = int64(len(m.Payload))
				c.bytes += int64(len(m.Payload))
			}
		}
		c.mu.Unlock()
	}
	return c.pubSub.Publish(topic, msgs...)
}

func (c *countingBus) counts() (attempts int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sent), c.bytes
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// A copy for a listener on another node crosses the bus as a command of
// its own, an encoded copy of the request, which the sending node holds
// until that node acknowledges it. Those copies take from the sending
// node's body budget as copies to its own listeners do: one delivery to an
// Endpoint with 64 listeners on a node that has not acknowledged them yet
// (here one that never does) holds the account's share of the budget, not
// 64 copies of its body, and the copies past the share are recorded as
// dropped, none lost.
func TestCopiesToAnotherNodeHoldTheSendersBudget(t *testing.T) {
	c := newCluster(t)
	budget := ingress.NewBodyBudget(16<<20, 1) // 4 MiB per key
	logger := slog.New(slog.DiscardHandler)
	c.front = tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: c.Store, Codec: c.Codec, Logger: logger}), Logger: logger, Node: "front",
		Remote: NewClient(c.bus), Roster: c.roster, Bodies: budget,
	})
	t.Cleanup(c.front.Close)
	counted := &countingBus{pubSub: c.bus.pubsub, sent: map[string]int64{}}
	c.bus.pubsub = counted

	c.listen(t, "front", tunnel.SessionInfo{AgentID: "f1", Primary: true})
	const listeners = 64
	var connected []domain.Event
	for i := range listeners {
		id := fmt.Sprintf("g%d", i)
		c.nodes[id] = "gone"
		connected = append(connected, domain.AgentConnected{EndpointID: "ep", AgentID: id, Node: "gone"})
	}
	c.AppendChanges(t, domain.AgentStream("ep"), domain.Any(), connected, "")

	cmd := c.Receive(t, "ep", "acc")
	cmd.Body = bytes.Repeat([]byte("x"), 1<<20)
	before := heapInUse()
	out, err := c.front.Forward(t.Context(), cmd)
	if err != nil || string(out.Body) != "f1" {
		t.Fatalf("forward = %+v, %v; want f1's answer", out, err)
	}
	dropped := func() int {
		n := 0
		for _, a := range c.attempts(t, cmd.DeliveryID) {
			if strings.HasSuffix(a, domain.FailureCopyDropped) {
				n++
			}
		}
		return n
	}
	// Every copy is sent or dropped.
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if sent, _ := counted.counts(); sent+dropped() < listeners {
			return fmt.Errorf("%d copies sent, %d dropped, of %d", sent, dropped(), listeners)
		}
		return nil
	})
	held := heapInUse() - before
	sent, sentBytes := counted.counts()
	t.Logf("%d copies of a 1 MiB body sent to the other node (%d MiB), %d dropped; heap held while unacknowledged: %d MiB",
		sent, sentBytes>>20, dropped(), held>>20)
	if share := budget.Share(); sentBytes > share {
		t.Errorf("copies unacknowledged by the other node: %d bytes, want at most the account's share, %d", sentBytes, share)
	}

	// The node is lost: the copies it never answered are recorded failed,
	// the others dropped; every listener's copy is recorded.
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		c.front.NodeLost("gone")
		if got := len(c.attempts(t, cmd.DeliveryID)); got != listeners+1 {
			return fmt.Errorf("%d attempts recorded, want %d", got, listeners+1)
		}
		return nil
	})
	if n := dropped(); n != listeners-sent {
		t.Errorf("%d copies recorded as dropped, want the %d not sent", n, listeners-sent)
	}
	if got := budget.InUse(); got != 0 {
		t.Errorf("the budget holds %d bytes once every copy is settled", got)
	}
}

// serving attaches a session that answers every command at once and keeps
// none of them (agentOn's keep what they got).
func serving(t *testing.T, hub *tunnel.Hub, info tunnel.SessionInfo) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	work, err := hub.Attach(ctx, info)
	if err != nil {
		cancel()
		t.Fatalf("attach: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cmd := range work {
			out := domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200, Body: []byte(info.AgentID), DurationMs: 1}
			if err := hub.Complete(context.Background(), info.AccountID, info.AgentID, out); err != nil && ctx.Err() == nil {
				t.Errorf("complete %s: %v", cmd.AttemptID, err)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// A copy's request is held while it is counted, and no longer: once the
// other node has acknowledged a copy, the sending node keeps nothing of
// it, and the receiving node nothing once its frame is written, however
// long its listener takes to answer. 32 deliveries of 1 MiB to an
// Endpoint whose listener on the other node reads its copies and never
// answers held 64 MiB on the two nodes until the copies' timeout.
func TestCopiesToAnotherNodeAreHeldOnlyWhileCounted(t *testing.T) {
	c := newCluster(t)
	budget := ingress.NewBodyBudget(64<<20, 1)
	logger := slog.New(slog.DiscardHandler)
	c.front = tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: c.Store, Codec: c.Codec, Logger: logger}), Logger: logger, Node: "front",
		Remote: NewClient(c.bus), Roster: c.roster, Bodies: budget,
	})
	t.Cleanup(c.front.Close)
	c.nodes["f1"], c.nodes["b1"] = "front", tunnel.DefaultNode
	serving(t, c.front, tunnel.SessionInfo{AgentID: "f1", EndpointID: "ep", AccountID: "acc", Primary: true})
	// b1 reads every copy, has it written, and never answers.
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop) // before the Hubs close: its copies end 503
	work, err := c.hub.Attach(ctx, tunnel.SessionInfo{AgentID: "b1", EndpointID: "ep", AccountID: "acc"})
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int32
	go func() {
		for cmd := range work {
			c.hub.Written("b1", cmd.AttemptID)
			read.Add(1)
		}
	}()

	const deliveries = 32
	before := heapInUse()
	var ids []string
	for range deliveries {
		cmd := c.Receive(t, "ep", "acc")
		cmd.Body, cmd.Timeout = bytes.Repeat([]byte("x"), 1<<20), time.Hour
		if out, err := c.front.Forward(t.Context(), cmd); err != nil || string(out.Body) != "f1" {
			t.Fatalf("forward = %+v, %v; want f1's answer", out, err)
		}
		ids = append(ids, cmd.DeliveryID)
	}
	// Every copy is read by b1 (or dropped there, and recorded so) and
	// acknowledged.
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		dropped := 0
		for _, id := range ids {
			if strings.HasSuffix(c.attempts(t, id)["b1"], domain.FailureCopyDropped) {
				dropped++
			}
		}
		if n := int(read.Load()) + dropped; n < deliveries {
			return fmt.Errorf("%d copies read or dropped of %d", n, deliveries)
		}
		if n := budget.InUse(); n != 0 {
			return fmt.Errorf("%d bytes of copies unacknowledged", n)
		}
		return nil
	})
	held := heapInUse() - before
	t.Logf("%d copies of 1 MiB read by a listener that does not answer: %d MiB held on the two nodes", read.Load(), held>>20)
	if held > deliveries<<20/4 {
		t.Errorf("copies read and unanswered hold %d MiB, want nothing of their requests (%d MiB)", held>>20, deliveries)
	}
}

// heardRemote is a node's Client counting the forwards whose
// acknowledgement it heard: from then on it holds nothing of their
// requests (Client.ForwardTo calls taken).
type heardRemote struct {
	*Client
	heard atomic.Int32
}

func (r *heardRemote) ForwardTo(ctx context.Context, node string, cmd domain.ForwardCommand, taken func()) (domain.ForwardOutcome, error) {
	return r.Client.ForwardTo(ctx, node, cmd, func() {
		if taken != nil {
			taken()
		}
		r.heard.Add(1)
	})
}

// A forward another node sends here holds its request here until its
// outcome is recorded, as the node the sender reached holds it: it is
// counted in this node's body budget too, under its account's key, so
// that the requests of every other node together hold this one's budget
// at most. 32 forwards of 1 MiB for a listener that does not read, sent
// from another node, held 32 MiB here beyond any budget; now the
// account's share, the others answered 503 and recorded.
func TestForwardsFromOtherNodesHoldThisNodesBudget(t *testing.T) {
	budget := ingress.NewBodyBudget(16<<20, 1) // 4 MiB per key
	c := newClusterOn(t, newEnvWith(t, budget))
	remote := &heardRemote{Client: NewClient(c.bus)}
	logger := slog.New(slog.DiscardHandler)
	c.front = tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: c.Store, Codec: c.Codec, Logger: logger}), Logger: logger, Node: "front",
		Remote: remote, Roster: c.roster,
	})
	t.Cleanup(c.front.Close)
	// b1 never reads: its queue fills, then forwards wait to be queued.
	ctx, stop := context.WithCancel(context.Background())
	c.nodes["b1"] = tunnel.DefaultNode
	if _, err := c.hub.Attach(ctx, tunnel.SessionInfo{AgentID: "b1", EndpointID: "ep", AccountID: "acc"}); err != nil {
		t.Fatal(err)
	}

	const forwards = 32
	body := bytes.Repeat([]byte("x"), 1<<20) // one body for all: what is held per forward is the other node's
	before := heapInUse()
	type result struct {
		cmd domain.ForwardCommand
		out domain.ForwardOutcome
		err error
	}
	results := make(chan result, forwards)
	for range forwards {
		cmd := c.Receive(t, "ep", "acc")
		cmd.Body, cmd.Timeout = body, time.Hour
		go func() {
			out, err := c.front.Forward(context.Background(), cmd)
			results <- result{cmd, out, err}
		}()
	}
	// Every forward is acknowledged and its sender heard it, and each is
	// answered (refused) or counted here, waiting for b1 (counted at its
	// body and a few bytes more). Measured sooner, the heap held requests
	// on their way: acknowledged but not yet heard by their sender, or
	// refused but not yet recorded (25 MiB in one run of 30).
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		heard, answered, waiting := int(remote.heard.Load()), len(results), int(budget.InUse()/int64(len(body)))
		if heard < forwards || answered+waiting < forwards {
			return fmt.Errorf("of %d forwards %d acknowledged and heard, %d answered, %d waiting here", forwards, heard, answered, waiting)
		}
		return nil
	})
	held := heapInUse() - before
	t.Logf("%d forwards of 1 MiB from another node to a listener that does not read: %d MiB held here", forwards, held>>20)
	if held > forwards<<20/3 {
		t.Errorf("forwards from another node hold %d MiB here, want at most the account's share of the budget (%d MiB)", held>>20, budget.Share()>>20)
	}
	stop() // b1 leaves: the forwards still waiting end
	refused := 0
	for range forwards {
		r := <-results
		if r.err != nil || r.out.Status != 503 {
			t.Errorf("forward %s: %+v, %v; want a 503", r.cmd.AttemptID, r.out, r.err)
			continue
		}
		if r.out.Error == domain.FailureNodeBodyBudget+" ("+tunnel.DefaultNode+")" {
			refused++
		}
		// Each attempt has the one outcome its sender got.
		if _, ev := c.Last(t, domain.DeliveryStream(r.cmd.DeliveryID)); ev.(domain.ForwardFailed).Error != r.out.Error {
			t.Errorf("forward %s: recorded %+v, the sender got %q", r.cmd.AttemptID, ev, r.out.Error)
		}
	}
	if share := int(budget.Share() >> 20); refused < forwards-share {
		t.Errorf("%d forwards refused for the budget, want all but the %d the account's share holds", refused, share)
	}
	if n := budget.InUse(); n != 0 {
		t.Errorf("the budget holds %d bytes once every forward ended", n)
	}
}

// The answers of copies run on another node come back to the node that
// sent them, which records them after the primary's outcome: while the
// primary is silent they are held there only as counted in its body
// budget (their account's share), the rest without their bodies, and
// every copy is recorded. 32 listeners on the other node answering 1 MiB
// held 32 MiB on the sending node.
func TestCopiesAnswersFromAnotherNodeAreCounted(t *testing.T) {
	budget := ingress.NewBodyBudget(16<<20, 1) // 4 MiB per key, on each node
	c := newClusterOn(t, newEnvWith(t, ingress.NewBodyBudget(16<<20, 1)))
	logger := slog.New(slog.DiscardHandler)
	c.front = tunnel.NewHub(tunnel.HubConfig{
		Recorder: record.New(record.Config{Store: c.Store, Codec: c.Codec, Logger: logger}), Logger: logger, Node: "front",
		Remote: NewClient(c.bus), Roster: c.roster, Bodies: budget,
	})
	t.Cleanup(c.front.Close)
	const copies, size = 32, 1 << 20
	release := make(chan struct{})
	c.nodes["f1"] = "front"
	agentOn(t, c.front, tunnel.SessionInfo{AgentID: "f1", EndpointID: "ep", AccountID: "acc", Primary: true},
		func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
			<-release // silent until the copies' answers are measured
			return domain.ForwardOutcome{Status: 200, Body: []byte("f1")}, true
		})
	for i := range copies {
		id := fmt.Sprintf("b%d", i)
		c.nodes[id] = tunnel.DefaultNode
		agentOn(t, c.hub, tunnel.SessionInfo{AgentID: id, EndpointID: "ep", AccountID: "acc"},
			func(domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				return domain.ForwardOutcome{Status: 200, Body: bytes.Repeat([]byte("y"), size)}, true
			})
	}
	cmd := c.Receive(t, "ep", "acc")
	cmd.CaptureResponse, cmd.Timeout = true, time.Hour
	before := heapInUse()
	res := make(chan domain.ForwardOutcome, 1)
	go func() {
		out, err := c.front.Forward(context.Background(), cmd)
		if err != nil {
			t.Errorf("forward: %v", err)
		}
		res <- out
	}()
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if n := c.front.CopyAnswersWaiting(); n != copies {
			return fmt.Errorf("%d copies' answers back, want %d", n, copies)
		}
		return nil
	})
	held := heapInUse() - before
	t.Logf("%d copies on another node answering %d KiB while the primary is silent: the heap %d MiB larger", copies, size>>10, held>>20)
	// The node that ran them keeps some to answer again, within its own
	// budget's share.
	if limit := 2*budget.Share() + 4<<20; held > limit {
		t.Errorf("copies' answers waiting for the primary hold %d MiB, want at most the sending node's share (%d MiB) and those kept on the other (as much)",
			held>>20, budget.Share()>>20)
	}
	close(release)
	if out := <-res; string(out.Body) != "f1" {
		t.Fatalf("forward answered %d %q, want f1's answer", out.Status, out.Body)
	}
	// Each copy's answer is let go of once it is recorded: none waits,
	// every copy is in the log. (Polling the log itself read and decoded
	// its captured bodies, seconds under -race, on every try.)
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := c.front.CopyAnswersWaiting(); n != 0 {
			return fmt.Errorf("%d copies' answers not recorded yet", n)
		}
		return nil
	})
	var captured, notCaptured int
	for _, r := range c.Events(t, domain.DeliveryStream(cmd.DeliveryID)) {
		switch a := c.Decode(t, r).(type) {
		case domain.ForwardFailed:
			t.Errorf("attempt %s of %s recorded failed (copy=%v): %d %s", a.AttemptID, a.AgentID, a.Copy, a.Status, a.Error)
		case domain.ForwardResponded:
			switch {
			case !a.Copy:
			case a.BodySize != size:
				t.Errorf("copy %s recorded with a body of %d bytes, want %d", a.AttemptID, a.BodySize, size)
			case a.Captured && len(a.Body) == size:
				captured++
			case !a.Captured && a.Body == nil && a.NotCaptured == domain.NotCapturedBodyBudget:
				notCaptured++
			default:
				t.Errorf("copy %s recorded captured=%v with %d bytes, not captured %q", a.AttemptID, a.Captured, len(a.Body), a.NotCaptured)
			}
		}
	}
	if captured+notCaptured != copies {
		t.Errorf("%d copies recorded, want %d", captured+notCaptured, copies)
	}
	t.Logf("%d copies recorded with their answer's body, %d without", captured, notCaptured)
	if captured == 0 || notCaptured == 0 {
		t.Errorf("%d copies' bodies recorded, %d not: want those within the share recorded, the rest not", captured, notCaptured)
	}
}
