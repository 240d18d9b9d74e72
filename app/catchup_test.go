package app_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/jetstream"
	"github.com/relayhq/relay/internal/natstest"
)

// BenchmarkNewNodeCatchUp measures how long a node that joins with an
// empty data folder takes to build its views from a JetStream log of
// RELAY_CATCHUP_EVENTS inspector deliveries (default 100 000, each 1 KiB of
// JSON body with four headers): the time app.New takes, which returns once
// the views have applied the whole log. docs/scale-out.md has the figures.
//
//	RELAY_CATCHUP_EVENTS=100000 go test -run '^$' -bench NewNodeCatchUp -benchtime 1x -timeout 30m ./app
func BenchmarkNewNodeCatchUp(b *testing.B) {
	n := 100_000
	if v := os.Getenv("RELAY_CATCHUP_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	url := natstest.Start(b).URL()
	seed(b, url, n)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		a, err := app.New(context.Background(), app.Config{Data: b.TempDir(), EventStore: url, NoSweeps: true})
		if err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.ReportMetric(took.Seconds(), "s/catch-up")
		b.ReportMetric(took.Seconds()*1e6/float64(n+1), "s-per-million-events")
		b.StopTimer()
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// seed appends one inspector and n deliveries to it, 16 appenders at once.
func seed(b *testing.B, url string, n int) {
	b.Helper()
	servers, opts, err := jetstream.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	store, err := jetstream.Open(context.Background(), servers, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	codec := domain.NewCodec()
	at := time.Now()
	append1 := func(stream string, expected domain.ExpectedRevision, e domain.Event) {
		data, err := codec.Encode(uuid.NewString(), e, at, domain.Trace{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := store.Append(context.Background(), stream, expected, data); err != nil {
			b.Fatal(err)
		}
	}
	const inspector = "catchupinspectr1"
	append1(domain.InspectorStream(inspector), domain.NoStream(), domain.InspectorCreated{InspectorID: inspector, IdleTTLMs: 3_600_000})
	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	body[0], body[len(body)-1] = '"', '"'
	headers := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "User-Agent", Value: "bench"},
		{Name: "X-Request-Id", Value: "r"}, {Name: "Content-Length", Value: "1024"}}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				id := fmt.Sprintf("0190%04x-0000-7000-8000-%012x", i>>16, i)
				append1(domain.DeliveryStream(id), domain.NoStream(), domain.DeliveryReceived{
					DeliveryID: id, Address: inspector, AddressKind: domain.AddressInspector, Method: "POST",
					Target: "/hook/" + strconv.Itoa(i), Host: inspector + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
					Headers: headers, Body: body, BodySize: int64(len(body)), Complete: true,
					Answer: &domain.ReceiptAnswer{Status: 204},
				})
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
