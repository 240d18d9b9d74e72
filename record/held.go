package record

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
)

// ReceiptHold is how long a proxied delivery's receipt waits in memory for
// its first attempt's answer before it is appended alone. An answer within
// it is recorded in the receipt (domain.ReceiptForward.Responded): one event
// and one append per delivery instead of two, which halves what the log and
// the views write for it. The forward does not wait for it, and the sender
// is still answered only once the receipt and the answer are durable; live
// history shows a pending delivery at most this much later.
const ReceiptHold = 25 * time.Millisecond

// heldReceipt is a proxied delivery's receipt not yet appended (see
// ReceiptHold). Exactly one of three things appends it, whichever comes
// first: the answer (merge, one event), the hold's end (flush, the receipt
// alone) or someone who must know it is durable (wait, which flushes it).
// The recorder keeps it by attempt until the attempt's outcome is recorded
// or the sender's side has waited for it, so that RecordOutcome knows
// whether the receipt records the answer.
type heldReceipt struct {
	r       *Recorder
	stream  string
	tr      domain.Trace
	id      string    // the receipt's event ID, known to the forward command
	attempt string    // the attempt the receipt requests, by which the recorder keeps it
	at      time.Time // when it was received: the event's time however it is appended
	rc      Receipt
	d       *domain.Delivery // the delivery whose one change is the receipt
	timer   *time.Timer

	mu      sync.Mutex
	settled func() error // set once appended: waits for that append, once
	pos     uint64       // the append's position, once settled has returned nil
}

// holdReceipt keeps d's receipt for its answer and returns it; the hold
// ends by itself after ReceiptHold.
func (r *Recorder) holdReceipt(stream, attempt string, tr domain.Trace, d *domain.Delivery, rc Receipt) *heldReceipt {
	h := &heldReceipt{r: r, stream: stream, attempt: attempt, tr: tr, id: r.newID(), at: r.now(), rc: rc, d: d}
	r.heldMu.Lock()
	if r.held == nil {
		r.held = map[string]*heldReceipt{}
	}
	r.held[attempt] = h
	r.heldMu.Unlock()
	h.mu.Lock() // the timer's flush reads h.timer under h.mu
	h.timer = time.AfterFunc(ReceiptHold, func() { _ = h.flush() })
	h.mu.Unlock()
	return h
}

// takeHeld returns the receipt held for attemptID, if any, and forgets it.
func (r *Recorder) takeHeld(attemptID string) *heldReceipt {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	h := r.held[attemptID]
	delete(r.held, attemptID)
	return h
}

// queue appends events (the receipt, with its answer or not) with the
// receipt's ID and time; the caller holds h.mu and h is not settled.
func (h *heldReceipt) queue(events []domain.Event) {
	h.timer.Stop()
	data, _, err := h.r.codec.EncodeAll([]string{h.id}, h.r.newID, h.r.stamp(events), h.at, h.tr)
	if err == nil {
		var wait func() (domain.AppendResult, error)
		if wait, err = h.r.queueData(context.Background(), h.stream, domain.NoStream(), data, &h.rc); err == nil {
			h.settled = sync.OnceValue(func() error {
				res, err := wait()
				h.pos = res.Position // read only after settled returns
				return err
			})
			return
		}
	}
	err = fmt.Errorf("append to %s: %w", h.stream, err)
	h.settled = func() error { return err }
}

// flush appends the receipt alone unless it is appended already, and
// returns the wait for the append that carries it.
func (h *heldReceipt) flush() func() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.settled == nil {
		h.queue(h.d.Changes())
	}
	return h.settled
}

// wait returns once the receipt is durable (or its append failed),
// appending it alone first if nothing has yet. The sender's side waits for
// it once its attempt is over, whatever became of the attempt, so the
// recorder forgets h here (or in RecordOutcome, if that comes first).
func (h *heldReceipt) wait() error {
	h.r.takeHeld(h.attempt)
	return h.flush()()
}

// merge appends the receipt with fr recorded in it and waits for it,
// returning its position; ok is false, and nothing is appended, when the
// receipt was appended already (the hold ended first) or fr cannot be
// recorded in it.
func (h *heldReceipt) merge(fr domain.ForwardResponded) (pos uint64, ok bool, err error) {
	h.mu.Lock()
	if h.settled != nil || !h.d.RespondAtReceipt(fr) {
		h.mu.Unlock()
		return 0, false, nil
	}
	h.queue(h.d.Changes())
	settled := h.settled
	h.mu.Unlock()
	if err := settled(); err != nil {
		return 0, true, err
	}
	return h.pos, true, nil
}
