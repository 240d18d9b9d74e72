package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/internal/testwait"
)

// BenchmarkProxiedDelivery is one proxied delivery through the whole relay
// in one process: a sender's POST (1 KiB of JSON, a signed webhook's
// headers) to a PROXY Endpoint, recorded in the embedded log, forwarded on
// the agents' binary data path to a real agent (agentcli) that calls a
// local handler, and answered. Run with -benchmem: allocations per op are a
// figure a shared machine does not move. They include the sender's, the
// agent's, the local handler's and the views' own (none of which the
// relay's request path spends), so compare them between two versions of
// the relay's packages, not with zero.
//
//	go test -run '^$' -bench ProxiedDelivery -benchmem -benchtime 2000x ./app
func BenchmarkProxiedDelivery(b *testing.B) {
	base := benchRelay(b)
	answer := []byte(`{"received":true}`)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(local.Close)

	var up struct{ SignUp struct{ Token string } }
	gql(b, base, "", `mutation{ signUp(name: "bench"){ token } }`, nil, &up)
	token := up.SignUp.Token
	target := strings.TrimPrefix(local.URL, "http://")
	var ep struct{ CreateEndpoint struct{ ID string } }
	gql(b, base, token, `mutation($t: String!){ createEndpoint(input: {name: "bench", mode: PROXY, target: $t}){ id } }`,
		map[string]any{"t": target}, &ep)
	id := ep.CreateEndpoint.ID

	ctx, cancel := context.WithCancel(b.Context())
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agentcli.Serve(ctx, agentcli.Options{Server: base, Token: token,
			Observer:  &agentcli.TextObserver{Out: io.Discard, Status: io.Discard},
			Endpoints: []agentcli.Route{{EndpointID: id, Target: target}}})
	}()
	b.Cleanup(func() { cancel(); <-agentDone })
	testwait.CheckFor(b, 10*time.Second, 20*time.Millisecond, func() error {
		var out struct{ Endpoint struct{ AgentConnected bool } }
		gql(b, base, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": id}, &out)
		if !out.Endpoint.AgentConnected {
			return fmt.Errorf("agent not connected yet")
		}
		return nil
	})

	send := webhookSender(b, base, id, http.StatusOK, answer)
	for range 200 { // warm-up: connections, worker goroutines, the views' statements
		send()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send()
	}
}
