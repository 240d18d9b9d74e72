package record_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/record"
)

type usageCall struct {
	address, account string
	bytes            int64
	position         uint64
}

type usageLog struct {
	mu    sync.Mutex
	calls []usageCall
}

func (u *usageLog) Recorded(address, accountID string, bytes int64, position uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, usageCall{address, accountID, bytes, position})
}

// TestUsageHearsOfEveryReceipt: each way a delivery is received tells Usage
// the receipt's address, account, stored bytes (its event's payload in the
// log) and position once it is durable, whether the store queues appends
// or not; a forward's outcome is not a receipt.
func TestUsageHearsOfEveryReceipt(t *testing.T) {
	for _, queuer := range []bool{true, false} {
		t.Run(map[bool]string{true: "queued appends", false: "plain appends"}[queuer], func(t *testing.T) {
			store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			var s domain.EventStore = store
			if !queuer {
				s = &countingStore{EventStore: store} // hides QueueAppend
			}
			usage := &usageLog{}
			rec := record.New(record.Config{Store: s, Usage: usage})
			ctx := t.Context()
			req := domain.CapturedRequest{Method: "POST", Target: "/hook", Body: []byte(`{"a":1}`), BodySize: 7, Complete: true}
			rc := func(id string) record.Receipt {
				return record.Receipt{DeliveryID: id, Address: "ep-1", Kind: domain.AddressEndpoint, AccountID: "acc-1", Request: req}
			}
			if err := rec.ReceiveAnswered(ctx, rc("d-answered"), 204, "log"); err != nil {
				t.Fatal(err)
			}
			if err := rec.ReceiveQueued(ctx, rc("d-queued"), 202, "queued"); err != nil {
				t.Fatal(err)
			}
			cmd, q, err := rec.ReceiveForward(ctx, rc("d-forward"), record.Forward{})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 { // a second Wait is told the same, and tells Usage nothing more
				if err := q.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rec.RecordOutcome(ctx, cmd, domain.ForwardOutcome{Status: 200}); err != nil {
				t.Fatal(err)
			}
			var want []usageCall
			for _, id := range []string{"d-answered", "d-queued", "d-forward"} {
				evs, err := store.ReadStream(ctx, domain.DeliveryStream(id), 0, 1)
				if err != nil || len(evs) != 1 {
					t.Fatalf("read %s: %v", id, err)
				}
				want = append(want, usageCall{"ep-1", "acc-1", int64(len(evs[0].Data)), evs[0].Position})
			}
			if len(usage.calls) != len(want) {
				t.Fatalf("Usage heard %+v, want %+v", usage.calls, want)
			}
			for i := range want {
				if usage.calls[i] != want[i] {
					t.Errorf("receipt %d: Usage heard %+v, want %+v", i, usage.calls[i], want[i])
				}
			}
		})
	}
}
