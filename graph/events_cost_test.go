package graph_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// countingLog is the real store, counting the events the API reads from it.
type countingLog struct {
	domain.EventStore
	read atomic.Int64
}

func (c *countingLog) ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	evs, err := c.EventStore.ReadAll(ctx, after, max)
	c.read.Add(int64(len(evs)))
	return evs, err
}

func (c *countingLog) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	evs, err := c.EventStore.ReadStream(ctx, stream, from, max)
	c.read.Add(int64(len(evs)))
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
