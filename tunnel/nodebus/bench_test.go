package nodebus

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/tunnel"
)

// BenchmarkForwardRoundTrip measures one forward across the bus (another
// node's sessions): command published, handed to an in-process agent,
// answered, ForwardResponded appended to the SQLite store (one fsync),
// reply delivered.
func BenchmarkForwardRoundTrip(b *testing.B) {
	benchForward(b, func(e *env) forwarder { return e.client })
}

// BenchmarkHubForward measures the same forward served in process
// (Hub.Forward): nothing encoded, no bus.
func BenchmarkHubForward(b *testing.B) {
	benchForward(b, func(e *env) forwarder { return e.hub })
}

// forwarder is what both paths of a forward offer.
type forwarder interface {
	Forward(context.Context, domain.ForwardCommand) (domain.ForwardOutcome, error)
}

// benchForward sends b.N forwards one after another through the path via
// picks, to one in-process agent.
func benchForward(b *testing.B, via func(*env) forwarder) {
	e := newEnv(b)
	e.agent(b, tunnel.SessionInfo{AgentID: "bench", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	cmds := make([]domain.ForwardCommand, b.N)
	for i := range cmds {
		cmds[i] = e.Receive(b, "ep", "acc")
	}
	f := via(e)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		out, err := f.Forward(ctx, cmds[i])
		if err != nil || out.Status != 200 {
			b.Fatalf("forward: %+v, %v", out, err)
		}
	}
}

// BenchmarkForwardRoundTripParallel runs forwards from many goroutines at
// once to two agents; concurrent appends share the store's group commit.
func BenchmarkForwardRoundTripParallel(b *testing.B) {
	e := newEnv(b)
	e.agent(b, tunnel.SessionInfo{AgentID: "one", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	e.agent(b, tunnel.SessionInfo{AgentID: "two", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	cmds := make([]domain.ForwardCommand, b.N)
	for i := range cmds {
		cmds[i] = e.Receive(b, "ep", "acc")
	}
	var next atomic.Int64
	ctx := context.Background()
	b.SetParallelism(16)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			cmd := cmds[next.Add(1)-1]
			out, err := e.client.Forward(ctx, cmd)
			if err != nil || out.Status != 200 {
				b.Errorf("forward: %+v, %v", out, err)
				return
			}
		}
	})
}
