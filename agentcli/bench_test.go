package agentcli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/agentwire"
)

// BenchmarkAgentForward is one proxied delivery on the binary data path,
// as `relay agent` runs it: a scripted relay sends a forward frame (a
// typical webhook: 1 KiB of JSON and the headers a sender sends), the
// agent calls a local handler over loopback and reports its answer in a
// complete frame, which the relay answers with a done frame; the agent
// prints its forward line (to io.Discard). Run with -benchmem: allocations
// per op are a figure a shared machine does not move. They include the
// scripted relay's and the local handler's own, which the agent does not
// spend.
//
//	go test -run '^$' -bench AgentForward -benchmem ./agentcli
func BenchmarkAgentForward(b *testing.B) {
	answer := []byte(`{"received":true}`)
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	}))
	b.Cleanup(local.Close)
	srv := newWSServerOf(b, agentwire.Subprotocol)
	ctx, cancel := context.WithCancel(b.Context())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, Options{Server: srv.url, Token: "t", Observer: &TextObserver{Out: io.Discard, Status: io.Discard},
			Endpoints: []Route{{EndpointID: "ep-1", Target: strings.TrimPrefix(local.URL, "http://")}}})
	}()
	b.Cleanup(func() {
		cancel()
		<-served
	})
	p := srv.accept(b)
	p.handshake("t", "ep-1")

	body := bytes.Repeat([]byte(`{"k":"0123456789abcdef"},`), 1024/25)
	fwd := agentwire.Forward{Operation: subscriptionID(0), DeliveryID: "del-1", Method: "POST", Target: "/webhooks/stripe?x=1",
		Headers: []domain.Header{
			{Name: "Host", Value: "ep-1.relay.test"}, {Name: "User-Agent", Value: "Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
			{Name: "Content-Length", Value: strconv.Itoa(len(body))}, {Name: "Accept", Value: "*/*; q=0.5, application/xml"},
			{Name: "Cache-Control", Value: "no-cache"}, {Name: "Content-Type", Value: "application/json; charset=utf-8"},
			{Name: "Stripe-Signature", Value: "t=1700000000,v1=" + strings.Repeat("a", 64)}, {Name: "Accept-Encoding", Value: "gzip"},
		},
		Body: body, Host: "ep-1.relay.test", Scheme: "https", RemoteAddr: "203.0.113.7:4000"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		fwd.AttemptID = "att-" + strconv.Itoa(i)
		if err := p.conn.WriteMessage(websocket.BinaryMessage, agentwire.AppendForward(nil, fwd)); err != nil {
			b.Fatal(err)
		}
		c := readComplete(b, p)
		if c.AttemptID != fwd.AttemptID || c.Status != http.StatusOK || !bytes.Equal(c.Body, answer) || c.Receipt == nil {
			b.Fatalf("complete frame %+v, want %s 200 %s with a receipt", c, fwd.AttemptID, answer)
		}
		// On agentwire.Subprotocol the relay answers only a refusal.
	}
}
