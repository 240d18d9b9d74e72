package graph_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/google/uuid"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

// countingLog is the real store, counting the events the API reads from it.
type countingLog struct {
	domain.EventStore
	read  atomic.Int64
	bytes atomic.Int64 // of the events' data
}

func (c *countingLog) count(evs []domain.RecordedEvent) {
	c.read.Add(int64(len(evs)))
	for _, e := range evs {
		c.bytes.Add(int64(len(e.Data)))
	}
}

func (c *countingLog) ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	evs, err := c.EventStore.ReadAll(ctx, after, max)
	c.count(evs)
	return evs, err
}

func (c *countingLog) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	evs, err := c.EventStore.ReadStream(ctx, stream, from, max)
	c.count(evs)
	return evs, err
}

// TestAccountEventsCostThePage: an account's page of the events query reads
// the events it shows (and the one after), however many events of others
// lie between them; paging still walks every own event once, in order.
func TestAccountEventsCostThePage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "ada") { token } }`, &su)
	auth := client.AddHeader("Authorization", "Bearer "+su.SignUp.Token)

	// Between each own event, 1000 events of streams the account does not
	// own (an unknown type: the views skip it, the log keeps it).
	const noise, own = 1000, 4
	for i := range own {
		data := make([]domain.EventData, noise)
		for j := range data {
			data[j] = domain.EventData{ID: uuid.NewString(), Type: "test.noise.v1", Data: []byte(`{}`),
				Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now()}}
		}
		if _, err := e.store.Append(ctx, "noise-"+strconv.Itoa(i), domain.Any(), data...); err != nil {
			t.Fatal(err)
		}
		e.c.MustPost(`mutation($n: String!) { createEndpoint(input: {name: $n, mode: LOG}) { id } }`,
			&struct{ CreateEndpoint struct{ ID string } }{}, auth, client.Var("n", "ep"+strconv.Itoa(i)))
	}

	type page struct {
		Events struct {
			Nodes    []struct{ Position, Type string }
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
	}
	var (
		types []string
		after *string
		pages int
	)
	for pages = 1; pages <= 10; pages++ {
		e.log.read.Store(0)
		var p page
		e.c.MustPost(`query($after: String) { events(first: 2, after: $after) { nodes { position type } pageInfo { hasNextPage endCursor } } }`,
			&p, auth, client.Var("after", after))
		// The page's events and the one that tells whether there is more.
		if n := e.log.read.Load(); n > 3 {
			t.Errorf("page %d read %d events from the log, want at most 3", pages, n)
		}
		for _, n := range p.Events.Nodes {
			types = append(types, n.Type)
		}
		if !p.Events.PageInfo.HasNextPage {
			break
		}
		after = p.Events.PageInfo.EndCursor
	}
	// account.created, token.issued, token.used (its first use), then one
	// endpoint.created per Endpoint.
	if len(types) != 3+own || types[0] != domain.TypeAccountCreated || types[len(types)-1] != domain.TypeEndpointCreated {
		t.Fatalf("paged through %v in %d pages, want the account's %d events", types, pages, 3+own)
	}
}

// TestAccountEventsPageReadsABoundedPayload: an account's page of the
// events query reads its events whole from the log, bodies included,
// whatever it selects; a page stops once it has read
// commands.MaxEventPageBytes, so an operation of eight aliased pages holds
// a few MiB, not 100 events of 256 KiB each a page. Paging on still
// yields every event, once, in order.
func TestAccountEventsPageReadsABoundedPayload(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	acct := e.accountWithEndpoint(t, `{name: "l", mode: LOG}`)
	auth := acct.auth
	const deliveries = 100
	body := bytes.Repeat([]byte("x"), 256<<10) // the default capture cap
	for i := range deliveries {
		id := fmt.Sprintf("d-%03d", i)
		e.seed(t, domain.DeliveryStream(id), time.Now(), domain.DeliveryReceived{DeliveryID: id, Address: acct.endpoint,
			AddressKind: domain.AddressEndpoint, AccountID: acct.id, Method: "POST", Target: "/", Host: "h",
			Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Body: body, BodySize: int64(len(body)), Complete: true})
	}

	var q strings.Builder
	q.WriteString("{ ")
	for i := range 8 {
		fmt.Fprintf(&q, "p%d: events(first: 100, after: \"%d\") { nodes { type } } ", i, i)
	}
	q.WriteString("}")
	e.log.read.Store(0)
	e.log.bytes.Store(0)
	if err := postGraphQL(srv.URL, acct.token, fmt.Sprintf(`{"query":%q}`, q.String()), nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("eight pages read %d bytes, %d events", e.log.bytes.Load(), e.log.read.Load())
	// Each page stops after the read that passes the bound: at most the
	// bound and one run of a stream's events (one event of about 350 KiB
	// here, each delivery its own stream) a page.
	if n, most := e.log.bytes.Load(), int64(8*(commands.MaxEventPageBytes+512<<10)); n > most {
		t.Errorf("eight pages of events read %d bytes (%d events) from the log, want at most %d", n, e.log.read.Load(), most)
	}

	// Paging on reads every event once, in order.
	var (
		after    *string
		received int
		last     uint64
	)
	for range 2 * deliveries {
		var p struct {
			Events struct {
				Nodes    []struct{ Position, Type string }
				PageInfo struct {
					HasNextPage bool
					EndCursor   *string
				}
			}
		}
		e.c.MustPost(`query($after: String) { events(first: 100, after: $after) { nodes { position type } pageInfo { hasNextPage endCursor } } }`,
			&p, auth, client.Var("after", after))
		for _, n := range p.Events.Nodes {
			pos, err := strconv.ParseUint(n.Position, 10, 64)
			if err != nil || pos <= last {
				t.Fatalf("event at %q after %d", n.Position, last)
			}
			last = pos
			if n.Type == domain.TypeDeliveryReceived {
				received++
			}
		}
		if !p.Events.PageInfo.HasNextPage {
			break
		}
		after = p.Events.PageInfo.EndCursor
	}
	if received != deliveries {
		t.Fatalf("paged through %d deliveries' receipts, want %d", received, deliveries)
	}
}
