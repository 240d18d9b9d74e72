package projections

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// BenchmarkLogAndViews measures the log and the views together, as the
// relay runs them: c senders each append proxied deliveries to the embedded
// log, and the views follow by subscription (Run, its own lingering
// transactions in views.db) or not at all (log-only: the log's own cost).
// A delivery is recorded as the relay records it now, one receipt that
// records its request and its answer (answer-in-receipt, record.ReceiptHold),
// or as it did before: the receipt with its request, then the outcome
// appended at once or (split) once the receipt has committed, so that it
// lands in a later batch; or (two-receipt-events) the receipt and the
// request as two events, as the oldest logs hold them.
// cpu-µs/delivery is the whole process's CPU time, the views' catching up
// after the last append included.
func BenchmarkLogAndViews(b *testing.B) {
	for _, c := range []int{1, 16, 64} {
		for _, m := range []struct {
			name  string
			views bool   // false: the log alone
			shape string // how a delivery is recorded (see above)
		}{
			{"log-only", false, "answer-in-receipt"}, {"views", true, "answer-in-receipt"},
			{"log-only/receipt-then-outcome", false, "receipt-then-outcome"}, {"views/receipt-then-outcome", true, "receipt-then-outcome"},
			{"views/receipt-then-outcome/split", true, "split"},
			{"views/two-receipt-events", true, "two-receipt-events"},
		} {
			b.Run(fmt.Sprintf("c=%d/%s", c, m.name), func(b *testing.B) { benchLogAndViews(b, c, m.views, m.shape) })
		}
	}
}

func benchLogAndViews(b *testing.B, c int, views bool, shape string) {
	ctx := b.Context()
	s := newSynth(b, nil)
	store, v := s.store, s.open("views.db")
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	if !views { // the log's own cost
		ran <- nil
	} else {
		go func() { ran <- v.Run(runCtx) }()
	}
	defer func() { stop(); <-ran }()

	codec := domain.NewCodec()
	body := bytes.Repeat([]byte("x"), 1024)
	encode := func(at time.Time, evs ...domain.Event) []domain.EventData {
		out := make([]domain.EventData, len(evs))
		for i, ev := range evs {
			d, err := codec.Encode(uuid.NewString(), ev, at, domain.Trace{})
			if err != nil {
				b.Fatal(err)
			}
			out[i] = d
		}
		return out
	}
	deliver := func(id string) error {
		stream := domain.DeliveryStream(id)
		at := time.Now()
		received := domain.DeliveryReceived{DeliveryID: id, Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: "POST", Target: "/hook", Headers: benchHeaders, Body: body, BodySize: int64(len(body)), Complete: true,
			Forward: &domain.ReceiptForward{AttemptID: id + "-a1", EndpointID: "ep-1"}}
		outcome := domain.ForwardResponded{DeliveryID: id, AttemptID: id + "-a1", Status: 200, Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 1}
		if shape == "answer-in-receipt" {
			received.Forward.Responded = &outcome
			_, err := store.Append(ctx, stream, domain.NoStream(), encode(at, received)...)
			return err
		}
		receipt := []domain.Event{received}
		if shape == "two-receipt-events" {
			received.Forward = nil
			receipt = []domain.Event{received, domain.ForwardRequested{DeliveryID: id, AttemptID: id + "-a1", EndpointID: "ep-1"}}
		}
		// Queued, and the outcome appended at once, as ingress and the
		// tunnel did (here with an agent that answers at once).
		wait, err := store.QueueAppend(ctx, stream, domain.NoStream(), encode(at, receipt...)...)
		if err != nil {
			return err
		}
		if shape == "split" {
			if _, err := wait(); err != nil {
				return err
			}
		}
		_, err = store.Append(ctx, stream, domain.Exact(uint64(len(receipt)-1)), encode(at, outcome)...)
		if _, werr := wait(); werr != nil {
			return werr
		}
		return err
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, c)
	startCPU := cpu()
	b.ResetTimer()
	for range c {
		wg.Go(func() {
			for n := range next {
				if err := deliver(fmt.Sprintf("d-%08d", n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	if last, _ := store.LastPosition(ctx); views {
		if err := v.WaitFor(ctx, last); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64((cpu()-startCPU).Microseconds())/float64(b.N), "cpu-µs/delivery")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
}
