package jetstream

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/natstest"
)

// TestDeleteRacesAppends deletes a stream while appenders keep writing to
// it. Every append the store acknowledged must come before the tombstone
// and be counted by it (none may vanish uncounted), every later one must
// fail with ErrStreamDeleted, and the log must hold the tombstone alone.
func TestDeleteRacesAppends(t *testing.T) {
	t.Run("one server", func(t *testing.T) { deleteRacesAppends(t, openStore(t, natstest.Start(t), freshOptions())) })
	t.Run("R3 on three servers", func(t *testing.T) {
		deleteRacesAppends(t, openStore(t, natstest.StartCluster(t, 3), clusterOptions()))
	})
}

func deleteRacesAppends(t *testing.T, s *Store) {
	const (
		rounds    = 5
		appenders = 4
		perWriter = 20
	)
	ctx := testContext(t)
	for round := range rounds {
		stream := fmt.Sprintf("race-%d-%s", round, uuid.NewString())
		first := mustAppend(t, s, stream, domain.NoStream(), newEvent("first"))
		var (
			mu    sync.Mutex
			acked = []uint64{first.Position}
			wg    sync.WaitGroup
			fails []error
			busy  = make(chan struct{}) // closed once the appenders are well under way
		)
		for w := range appenders {
			wg.Go(func() {
				for i := range perWriter {
					res, err := s.Append(ctx, stream, domain.Any(), newEvent(fmt.Sprint(w, "-", i)))
					mu.Lock()
					switch {
					case err == nil:
						acked = append(acked, res.Position)
						if len(acked) == 2*appenders {
							close(busy)
						}
					case !errors.Is(err, domain.ErrStreamDeleted):
						fails = append(fails, err)
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			})
		}
		select {
		case <-busy:
		case <-ctx.Done():
			t.Fatalf("round %d: appends never got under way", round)
		}
		del, err := s.DeleteStream(ctx, stream, domain.Any())
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: DeleteStream: %v", round, err)
		}
		if len(fails) > 0 {
			t.Fatalf("round %d: appends failed otherwise than ErrStreamDeleted: %v", round, fails)
		}
		for _, p := range acked {
			if p >= del.Position {
				t.Fatalf("round %d: an append acknowledged at %d, after the tombstone at %d", round, p, del.Position)
			}
		}
		var own []domain.RecordedEvent
		for _, e := range readAllOf(t, s) {
			if e.Stream == stream {
				own = append(own, e)
			}
		}
		if len(own) != 1 || own[0].Position != del.Position || own[0].Revision != 0 {
			t.Fatalf("round %d: the log holds %d events of the deleted stream, want its tombstone alone at %d, revision 0", round, len(own), del.Position)
		}
		p, err := domain.NewCodec().Decode(own[0].Type, own[0].Data)
		if err != nil {
			t.Fatalf("round %d: tombstone: %v", round, err)
		}
		if tomb := p.(domain.StreamDeleted); tomb.Events != int64(len(acked)) || tomb.LastRevision != int64(len(acked))-1 {
			t.Fatalf("round %d: tombstone counts %d events up to revision %d; %d appends were acknowledged", round, tomb.Events, tomb.LastRevision, len(acked))
		}
	}
}

func readAllOf(t *testing.T, s *Store) []domain.RecordedEvent {
	t.Helper()
	var out []domain.RecordedEvent
	for after := uint64(0); ; {
		page, err := s.ReadAll(testContext(t), after, 100)
		if err != nil {
			t.Fatalf("ReadAll after %d: %v", after, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Position
	}
}

// TestDeleteOnExistingStream opens logs whose JetStream stream was created
// before the adapter deleted streams: one without roll-ups gets them at
// open; one that denies purges (an earlier relay's) cannot, since JetStream
// never lifts deny_purge, so DeleteStream refuses with ErrDeletesDenied and
// leaves the events while everything else works.
func TestDeleteOnExistingStream(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		denyPurge bool
		canDelete bool
	}{
		{"created by an earlier relay: purges denied", true, false},
		{"created without roll-ups", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			opts := freshOptions()
			opts.setDefaults()
			cfg := streamConfig(opts)
			cfg.DenyPurge, cfg.AllowRollup = tt.denyPurge, false
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatalf("create the stream: %v", err)
			}
			s := openStore(t, srv, opts)
			stream := "old-" + uuid.NewString()
			e := newEvent("kept?")
			mustAppend(t, s, stream, domain.NoStream(), e)

			_, err := s.DeleteStream(ctx, stream, domain.Any())
			if !tt.canDelete {
				if !errors.Is(err, ErrDeletesDenied) {
					t.Fatalf("DeleteStream = %v, want ErrDeletesDenied", err)
				}
				got, err := s.ReadStream(ctx, stream, 0, 10)
				if err != nil || len(got) != 1 || got[0].ID != e.ID {
					t.Fatalf("ReadStream after a refused delete = %+v, %v", got, err)
				}
				mustAppend(t, s, stream, domain.Exact(0), newEvent("appends still work"))
				return
			}
			if err != nil {
				t.Fatalf("DeleteStream: %v", err)
			}
			if _, err := s.ReadStream(ctx, stream, 0, 10); !errors.Is(err, domain.ErrStreamDeleted) {
				t.Fatalf("ReadStream after the delete: %v, want ErrStreamDeleted", err)
			}
			info, err := js.Stream(ctx, opts.Stream)
			if err != nil {
				t.Fatal(err)
			}
			if c := info.CachedInfo().Config; !c.AllowRollup || c.DenyPurge || !c.DenyDelete || c.MaxMsgs != -1 {
				t.Fatalf("stream config after open: rollup %v, deny purge %v, deny delete %v, max msgs %d", c.AllowRollup, c.DenyPurge, c.DenyDelete, c.MaxMsgs)
			}
		})
	}
}
