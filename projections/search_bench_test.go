package projections

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/readmodel"
)

// BenchmarkSearchBodiesPage: one page of a body search that matches
// nothing over 256 KiB requests, cut at the default byte budget.
func BenchmarkSearchBodiesPage(b *testing.B) {
	ctx := b.Context()
	dir := b.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	views, err := Open(ctx, filepath.Join(dir, "views.db"), store, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer views.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- views.Run(runCtx) }()
	defer func() { stop(); <-done }()
	w := writer{store: store, codec: domain.NewCodec()}
	body := strings.Repeat("b", 256<<10)
	var last uint64
	for i := range 100 {
		pos, err := w.receiveAnswered(ctx, fmt.Sprintf("d-%03d", i), "ep-1", domain.AddressEndpoint, "acct-1", request("/", body), 204, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		last = pos
	}
	if err := views.WaitFor(ctx, last); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(DefaultSearchLogBytes)
	b.ResetTimer()
	for b.Loop() {
		p, err := views.SearchDeliveries(ctx, "ep-1", 100, "", readmodel.DeliveryFilter{BodyContains: "never"}, false)
		if err != nil || !p.SearchCut {
			b.Fatalf("%+v %v", p.SearchCut, err)
		}
	}
}
