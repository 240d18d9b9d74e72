package projections

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/relayhq/relay/domain"
)

// BenchmarkAttemptResponses measures reading attempts' responses from a
// delivery with 25 captured answers of 8 MB (the agent keeps up to 10 MiB):
// two of them with their bodies (a comparison) and all of them without
// (a history page's statuses).
func BenchmarkAttemptResponses(b *testing.B) {
	e := newEnv(b, Options{})
	const (
		answers = 25
		size    = 8 << 20
	)
	e.must(e.writer.receive(e.ctx, "d1", "ep1", domain.AddressEndpoint, "acc", request("/e", `{}`), t0))
	for i := range answers {
		id := fmt.Sprintf("a%d", i)
		e.must(e.writer.onDelivery(e.ctx, "d1", t0, func(d *domain.Delivery) error {
			return d.RequestRetry(id, "acc", domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, nil)
		}))
		e.must(e.writer.onDelivery(e.ctx, "d1", t0, func(d *domain.Delivery) error {
			d.RecordResponse(domain.ForwardResponded{AttemptID: id, Status: 200, Body: bytes.Repeat([]byte{byte('a' + i%26)}, size),
				BodySize: size, Captured: true, DurationMs: 1})
			return nil
		}))
	}
	e.sync(e.views)
	for _, tc := range []struct {
		name   string
		bodies bool
		only   []string
		want   int
	}{
		{"compare-two", true, []string{"a3", "a20"}, 2},
		{"all-without-bodies", false, nil, answers},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := e.views.AttemptResponses(b.Context(), "d1", tc.bodies, tc.only...)
				if err != nil || len(got) != tc.want {
					b.Fatalf("read %d responses, %v; want %d", len(got), err, tc.want)
				}
			}
		})
	}
}
