package projections

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// BenchmarkApplyProxied measures the views applying proxied deliveries as
// the relay records them: a DeliveryReceived carrying its forward request
// and (in-receipt, as when the agent answers within record.ReceiptHold) the
// agent's answer, or else followed by the agent's ForwardResponded, to the
// Endpoints of one account, with time-ordered UUIDs (v7) for ids, as the
// relay makes them. Each op is one batch of perBatch deliveries, whose
// receipts and answers share the batch (the held path, docs/projections.md),
// or (split) with the answers in a batch of their own, as when the agent
// answers after the receipt's batch was applied; the history grows with b.N.
// cpu-ns/delivery is the applying thread's CPU time alone, steadier than
// the wall time on a shared machine.
func BenchmarkApplyProxied(b *testing.B) {
	for _, bc := range []struct {
		perBatch  int
		split     bool // the answers come in the next batch
		inReceipt bool // the receipts record the answers
	}{{16, false, true}, {64, false, true}, {256, false, true}, {512, false, true}, {16, false, false}, {64, false, false}, {16, true, false}} {
		perBatch := bc.perBatch
		name := fmt.Sprintf("batch=%d", perBatch)
		switch {
		case bc.split:
			name += "/split"
		case bc.inReceipt:
			name += "/in-receipt"
		}
		b.Run(name, func(b *testing.B) {
			const endpoints = 4
			s := newSynth(b, bytes.Repeat([]byte("x"), 1024))
			v := s.open("views.db")
			s.queue(domain.AccountStream("acct-1"), domain.AccountCreated{AccountID: "acct-1", Name: "a"})
			for i := range endpoints {
				id := fmt.Sprintf("ep-%d", i)
				s.queue(domain.EndpointStream(id), domain.EndpointCreated{EndpointID: id, AccountID: "acct-1", Name: id,
					Mode: domain.ModeProxy, ResponseCapture: true})
			}
			applyTB(b, v, s.take())
			deliveries := 0
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				for i := range perBatch {
					id := uuid.Must(uuid.NewV7()).String()
					stream := domain.DeliveryStream(id)
					address := fmt.Sprintf("ep-%d", i%endpoints)
					attempt := uuid.Must(uuid.NewV7()).String()
					r := domain.DeliveryReceived{DeliveryID: id, Address: address, AddressKind: domain.AddressEndpoint,
						AccountID: "acct-1", Method: "POST", Target: "/hook", Host: "relay.example", Proto: "HTTP/1.1",
						RemoteAddr: "127.0.0.1:40000", Headers: benchHeaders, Body: s.body, BodySize: int64(len(s.body)), Complete: true,
						Forward: &domain.ReceiptForward{AttemptID: attempt, EndpointID: address, Node: "node-1"}}
					if bc.inReceipt {
						r.Forward.Responded = &domain.ForwardResponded{DeliveryID: id, AttemptID: attempt, Status: 200,
							Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 3, AgentID: "agent-1"}
					}
					s.queue(stream, r)
				}
				batch := s.take()
				if bc.inReceipt {
					b.StartTimer()
					cpu += applyOnThread(b, v, batch)
					deliveries += perBatch
					continue
				}
				for _, e := range batch {
					_, id, _ := domain.ParseStream(e.Stream)
					p, err := decodeReceived(e.Data)
					if err != nil {
						b.Fatal(err)
					}
					s.queue(e.Stream, domain.ForwardResponded{DeliveryID: id, AttemptID: p.Forward.AttemptID, Status: 200,
						Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 3, AgentID: "agent-1"})
				}
				answers := s.take()
				if !bc.split {
					batch, answers = append(batch, answers...), nil
				}
				b.StartTimer()
				cpu += applyOnThread(b, v, batch, answers)
				deliveries += perBatch
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(deliveries), "ns/delivery")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(deliveries), "cpu-ns/delivery")
		})
	}
}

// applyOnThread applies each non-empty batch in turn and returns the CPU
// time the applying thread spent: the views' work without the other
// goroutines'.
func applyOnThread(b *testing.B, v *Runner, batches ...[]domain.RecordedEvent) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU(b)
	for _, batch := range batches {
		if len(batch) > 0 {
			applyTB(b, v, batch)
		}
	}
	return threadCPU(b) - before
}
