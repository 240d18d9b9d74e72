package tunnel

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/record"
)

// BenchmarkListeners forwards through the primary with 1 listener (no
// copy) and with 3 (two copies per delivery, answered and recorded). ns/op
// includes recording every copy (the loop waits for them at its end);
// sender-ns/op is how long the sender waited for the primary's answer.
// Run: go test -run X -bench Listeners -benchtime 2000x ./tunnel
func BenchmarkListeners(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("listeners=%d", n), func(b *testing.B) {
			e := newEnv(b)
			for i := range n {
				e.agent(b, SessionInfo{AgentID: fmt.Sprintf("ag-%d", i), EndpointID: "ep", AccountID: "acc"}, okAnswer)
			}
			cmds := make([]domain.ForwardCommand, b.N)
			for i := range cmds {
				cmds[i] = e.Receive(b, "ep", "acc")
			}
			var waited time.Duration
			b.ResetTimer()
			for _, cmd := range cmds {
				start := time.Now()
				out, err := e.hub.Forward(b.Context(), cmd)
				waited += time.Since(start)
				if err != nil || out.Status != 200 || out.AgentID != "ag-0" {
					b.Fatalf("forward: %+v, %v", out, err)
				}
			}
			e.hub.serving.Wait() // the copies' records too
			b.StopTimer()
			b.ReportMetric(float64(waited.Nanoseconds())/float64(b.N), "sender-ns/op")
		})
	}
}

// BenchmarkRecordCopy is the cost of recording one copy and its outcome
// (a read of the delivery stream and one append): the copies' own cost
// on the write path.
func BenchmarkRecordCopy(b *testing.B) {
	e := newEnv(b)
	rec := record.New(record.Config{Store: e.Store, Codec: e.Codec})
	cmds := make([]domain.ForwardCommand, b.N)
	for i := range cmds {
		cmds[i] = e.Receive(b, "ep", "acc")
		cmds[i].AttemptID = "copy-" + cmds[i].AttemptID
	}
	out, _ := okAnswer(domain.ForwardCommand{})
	b.ResetTimer()
	for _, cmd := range cmds {
		if _, err := rec.RecordCopy(b.Context(), cmd, "ag-1", out); err != nil {
			b.Fatal(err)
		}
	}
}
