package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// endpointReads is the log, counting the reads of Endpoints' streams.
type endpointReads struct {
	domain.EventStore
	n atomic.Int64
}

func (s *endpointReads) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	if strings.HasPrefix(stream, domain.EndpointStream("")) {
		s.n.Add(1)
	}
	return s.EventStore.ReadStream(ctx, stream, from, max)
}

// TestQueueDriverReadsSettingsFromTheViews: the queue driver takes a QUEUE
// Endpoint's mode, response capture and policy from its row in the views,
// so sending its queue reads nothing of the Endpoint's stream in the log,
// however long that stream grows (every reconfiguration adds to it; the
// driver read it whole again every second while the queue had work).
// Before, sending 5 queued deliveries read the Endpoint's stream from the
// log once (and again each second the queue had work); now never.
func TestQueueDriverReadsSettingsFromTheViews(t *testing.T) {
	reads := &endpointReads{}
	srv, token, id := proxyWithAgent(t, func(s domain.EventStore) domain.EventStore {
		reads.EventStore = s
		return reads
	})
	var updated struct{ UpdateEndpoint struct{ ID string } }
	gql(t, srv.URL, token, `mutation($id: ID!){ updateEndpoint(id: $id, input: {mode: QUEUE}){ id } }`, map[string]any{"id": id}, &updated)
	for _, tc := range []struct {
		name       string
		deliveries int
	}{
		{"5 queued deliveries sent", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := reads.n.Load()
			for range tc.deliveries {
				if status, body := sendHook(t, srv, id); status != http.StatusAccepted {
					t.Fatalf("the sender got %d %q, want 202 (queued)", status, body)
				}
			}
			testwait.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
				sent := 0
				for _, row := range history(t, srv, token, id) {
					for _, a := range row.Attempts {
						if a.Status != nil && *a.Status == http.StatusOK {
							sent++
						}
					}
				}
				if sent < tc.deliveries {
					return fmt.Errorf("%d of %d deliveries sent", sent, tc.deliveries)
				}
				return nil
			})
			n := reads.n.Load() - before
			t.Logf("%d deliveries sent from the queue: %d reads of the Endpoint's stream", tc.deliveries, n)
			if n != 0 {
				t.Errorf("%d reads of the Endpoint's stream in the log, want none", n)
			}
		})
	}
}
