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
// relay runs them: c senders each append proxied deliveries (the receipt
// with its forward request, then the outcome, as ingress and the tunnel
// do) to the embedded log, and the views follow by subscription (Run, its
// own lingering transactions in views.db) or not at all (log-only: the
// log's own cost), with the receipt and the request as two events (older
// logs) or one (now), held for its outcome or not (ReceiptHold), the
// outcome appended at once or (split) once the receipt has committed, so
// that it lands in a later batch. cpu-µs/delivery is the whole process's
// CPU time, the views' catching up after the last append included.
func BenchmarkLogAndViews(b *testing.B) {
	for _, c := range []int{1, 16, 64} {
		for _, m := range []struct {
			name  string
			views bool // false: the log alone
			hold  bool // the receipt is held for its outcome (ReceiptHold)
			one   bool // the receipt carries the request (one event, as recorded now)
			split bool // the outcome is appended once the receipt has committed, as an agent's answer is
		}{
			{"log-only", false, false, false, false}, {"views", true, false, false, false},
			{"views+hold", true, true, false, false},
			{"log-only/one-receipt-event", false, false, true, false}, {"views/one-receipt-event", true, false, true, false},
			{"views+hold/one-receipt-event", true, true, true, false},
			{"views/one-receipt-event/split", true, false, true, true},
		} {
			b.Run(fmt.Sprintf("c=%d/%s", c, m.name), func(b *testing.B) { benchLogAndViews(b, c, m.views, m.hold, m.one, m.split) })
		}
	}
}

func benchLogAndViews(b *testing.B, c int, views, hold, one, split bool) {
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
		rctx := ctx
		if hold {
			rctx = domain.WithCommitHold(ctx, 2*time.Millisecond) // record.ReceiptHold
		}
		// Queued, and the outcome appended at once, as ingress and the
		// tunnel do (here with an agent that answers at once).
		received := domain.DeliveryReceived{DeliveryID: id, Address: "ep-1", AddressKind: domain.AddressEndpoint, AccountID: "acct-1",
			Method: "POST", Target: "/hook", Headers: benchHeaders, Body: body, BodySize: int64(len(body)), Complete: true}
		receipt := []domain.Event{received, domain.ForwardRequested{DeliveryID: id, AttemptID: id + "-a1", EndpointID: "ep-1"}}
		if one {
			received.Forward = &domain.ReceiptForward{AttemptID: id + "-a1", EndpointID: "ep-1"}
			receipt = []domain.Event{received}
		}
		wait, err := store.QueueAppend(rctx, stream, domain.NoStream(), encode(at, receipt...)...)
		if err != nil {
			return err
		}
		if split {
			if _, err := wait(); err != nil {
				return err
			}
		}
		_, err = store.Append(ctx, stream, domain.Exact(uint64(len(receipt)-1)), encode(at,
			domain.ForwardResponded{DeliveryID: id, AttemptID: id + "-a1", Status: 200, Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 1})...)
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
