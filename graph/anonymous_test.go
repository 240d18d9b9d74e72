package graph_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ratelimit"
)

// rateLimited reports whether err is a RATE_LIMITED refusal.
func rateLimited(err error) bool {
	return err != nil && strings.Contains(err.Error(), `"code":"RATE_LIMITED"`)
}

// fromIP sends a request as the client at ip (IPv4 or IPv6).
func fromIP(ip string) client.Option {
	return func(r *client.Request) { r.HTTP.RemoteAddr = "[" + ip + "]:40000" }
}

// TestAnonymousFloodOfOneNetworkLeavesOthersTheirInspectors: an attacker
// with one IPv6 /48 creates inspectors as one client (/64) after another
// until every bucket it can reach is spent; guests of other networks still
// create theirs. The map is small (640 clients at 1/h) to keep the flood
// short; the relay's is 100 000 (ratelimit's tests flood that one).
func TestAnonymousFloodOfOneNetworkLeavesOthersTheirInspectors(t *testing.T) {
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		r.Anonymous = ratelimit.NewKeyed(ratelimit.Rate{N: 1, Per: time.Hour, Burst: 1}, 640)
	})
	const create = `mutation { createInspector { id } }`
	created := 0
	for i := range 700 {
		var out struct{ CreateInspector struct{ ID string } }
		if err := e.c.Post(create, &out, fromIP(fmt.Sprintf("2001:db8:7:%x::1", i))); err == nil {
			created++
		} else if !rateLimited(err) {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	// One network holds at most 1/64 of the map (10 clients) and shares
	// one more bucket: 11 inspectors, where it took the whole map before.
	if created > 640/64+1 {
		t.Errorf("one /48 created %d inspectors as 700 clients, want at most %d", created, 640/64+1)
	}
	var refused []string
	for _, guest := range []string{"2001:db8:9:1::1", "2a02:c7f:1:2::1", "198.51.100.7"} {
		var out struct{ CreateInspector struct{ ID string } }
		if err := e.c.Post(create, &out, fromIP(guest)); err != nil {
			if !rateLimited(err) {
				t.Fatalf("guest %s: %v", guest, err)
			}
			refused = append(refused, guest)
		}
	}
	if len(refused) > 0 {
		t.Errorf("after one /48 created %d inspectors as 700 clients, guests of other networks were refused: %v", created, refused)
	}
	var out struct{ CreateInspector struct{ ID string } }
	if err := e.c.Post(create, &out, fromIP("2001:db8:7:ffff::1")); !rateLimited(err) {
		t.Errorf("a new client of the flooding /48: %v, want RATE_LIMITED", err)
	}
}

// TestAnonymousMutationsBoundedPerNetwork: the clients of one network (an
// IPv6 /48, an IPv4 /24) create at most AnonymousNetworkShare times what
// one client may, however many addresses they hold; one address's
// refusals take nothing from its network, and other networks are not
// touched.
func TestAnonymousMutationsBoundedPerNetwork(t *testing.T) {
	perClient := ratelimit.Rate{N: 1, Per: time.Hour, Burst: 1}
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		r.Anonymous = ratelimit.NewKeyed(perClient, 100_000)
		r.AnonymousNetworks = ratelimit.NewKeyed(ratelimit.Rate{N: graph.AnonymousNetworkShare * perClient.N, Per: perClient.Per,
			Burst: graph.AnonymousNetworkShare * perClient.Burst}, 100_000)
	})
	const create = `mutation { createInspector { id } }`
	post := func(ip string) bool {
		t.Helper()
		var out struct{ CreateInspector struct{ ID string } }
		err := e.c.Post(create, &out, fromIP(ip))
		if err != nil && !rateLimited(err) {
			t.Fatalf("%s: %v", ip, err)
		}
		return err == nil
	}
	// One address asking again and again spends only its own bucket.
	for range 50 {
		post("2001:db8:7:1::1")
	}
	created := 0
	for i := range 200 {
		if post(fmt.Sprintf("2001:db8:7:%x::1", i+2)) {
			created++
		}
	}
	if want := graph.AnonymousNetworkShare - 1; created != want {
		t.Errorf("200 more clients of one /48 created %d inspectors, want %d (its network's burst less the first client's one)", created, want)
	}
	v4 := 0
	for i := range 40 {
		if post(fmt.Sprintf("198.51.100.%d", i+1)) {
			v4++
		}
	}
	if v4 != graph.AnonymousNetworkShare {
		t.Errorf("40 clients of one /24 created %d inspectors, want %d", v4, graph.AnonymousNetworkShare)
	}
	for _, guest := range []string{"2001:db8:9:1::1", "203.0.113.9"} {
		if !post(guest) {
			t.Errorf("a guest of another network (%s) was refused", guest)
		}
	}
}
