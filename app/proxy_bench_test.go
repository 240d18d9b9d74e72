package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
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
	a, err := app.New(b.Context(), app.Config{
		Data:           b.TempDir(),
		RetentionSweep: time.Hour, InspectorRetention: time.Hour,
		Commands:  commands.Config{SignupOpen: true},
		PublicURL: func(id string) string { return "http://" + id + ".localhost/" },
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(srv.Close)
	answer := []byte(`{"received":true}`)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(local.Close)

	var up struct{ SignUp struct{ Token string } }
	gql(b, srv.URL, "", `mutation{ signUp(name: "bench"){ token } }`, nil, &up)
	token := up.SignUp.Token
	target := strings.TrimPrefix(local.URL, "http://")
	var ep struct{ CreateEndpoint struct{ ID string } }
	gql(b, srv.URL, token, `mutation($t: String!){ createEndpoint(input: {name: "bench", mode: PROXY, target: $t}){ id } }`,
		map[string]any{"t": target}, &ep)
	id := ep.CreateEndpoint.ID

	ctx, cancel := context.WithCancel(b.Context())
	agentDone := make(chan error, 1)
	go func() {
		agentDone <- agentcli.Serve(ctx, agentcli.Options{Server: srv.URL, Token: token,
			Observer:  &agentcli.TextObserver{Out: io.Discard, Status: io.Discard},
			Endpoints: []agentcli.Route{{EndpointID: id, Target: target}}})
	}()
	b.Cleanup(func() { cancel(); <-agentDone })
	testwait.CheckFor(b, 10*time.Second, 20*time.Millisecond, func() error {
		var out struct{ Endpoint struct{ AgentConnected bool } }
		gql(b, srv.URL, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": id}, &out)
		if !out.Endpoint.AgentConnected {
			return fmt.Errorf("agent not connected yet")
		}
		return nil
	})

	body := []byte(`{"type":"payment_intent.succeeded","data":{"pad":"`)
	body = append(body, bytes.Repeat([]byte("x"), 1024-len(body)-3)...)
	body = append(body, `"}}`...)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	send := func() {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/stripe", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Host = id + ".localhost"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Stripe-Signature", "t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(got, answer) {
			b.Fatalf("sender got %d %q (%v), want 200 %s", resp.StatusCode, got, err, answer)
		}
	}
	for range 200 { // warm-up: connections, worker goroutines, the views' statements
		send()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		send()
	}
}
