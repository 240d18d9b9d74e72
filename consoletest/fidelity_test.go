package consoletest

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestAttemptFidelityBadge: the attempt list shows each attempt's fidelity
// receipt: "identical" when the agent reports handing over what the relay
// sent, "different: body" (a warning) when its receipt names the body, and
// nothing when it reported none. The agent here is written in the test
// and completes over GraphQL.
func TestAttemptFidelityBadge(t *testing.T) {
	token := signUp(t, "Fidelity")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Receipts", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID
	work := srv.Subscribe(t, token, `subscription($e: ID!){ forwardRequests(endpointId: $e){ attemptId method path headers{ name value } bodyBase64 } }`,
		map[string]any{"e": id})
	defer work.Close()
	harness.Eventually(t, 10*time.Second, "the agent connected", func() bool {
		var out struct{ Endpoint struct{ AgentConnected bool } }
		srv.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ agentConnected } }`, map[string]any{"id": id}, &out)
		return out.Endpoint.AgentConnected
	})

	for _, path := range []string{"/honest", "/altered", "/unreported"} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = srv.TrySendRaw(harness.RawRequest{Method: "POST", Target: path, Host: srv.AddressHost(id),
				Headers: [][2]string{{"Content-Type", "application/json"}}, Body: []byte(`{"n":1}`)})
		}()
		var fr struct {
			ForwardRequests struct {
				AttemptID, Method, Path string
				Headers                 []domain.Header
				BodyBase64              string
			}
		}
		if err := json.Unmarshal(work.Next(t, 10*time.Second), &fr); err != nil {
			t.Fatal(err)
		}
		f := fr.ForwardRequests
		body, _ := base64.StdEncoding.DecodeString(f.BodyBase64)
		in := map[string]any{"attemptId": f.AttemptID, "status": 200}
		if path != "/unreported" {
			if path == "/altered" {
				body = []byte(`{"n":2}`) // what this agent says it handed over
			}
			d := domain.DigestRequest(f.Method, f.Path, f.Headers, body)
			in["receipt"] = map[string]any{"requestLine": d.RequestLine, "headers": d.Headers, "body": d.Body}
		}
		srv.MustGraphQL(t, token, `mutation($in: CompleteForwardInput!){ completeForward(input: $in) }`, map[string]any{"in": in}, nil)
		<-done
	}

	p := newPage(t, 1280, 800)
	p.open("/e/" + id + "#token=" + token)
	p.waitLive()
	badge := `document.querySelector('.detail [data-testid=attempt-fidelity]')`
	for _, tt := range []struct{ path, text, class string }{
		{"/honest", "identical", "badge-ok"},
		{"/altered", "different: body", "badge-warn"},
	} {
		p.openRow(tt.path)
		p.waitFor("the fidelity badge of "+tt.path, badge+`?.textContent.trim() === '`+tt.text+`'`)
		if !eval[bool](p, badge+`.classList.contains('`+tt.class+`')`) {
			t.Errorf("%s: the badge %q is not %s", tt.path, p.text(`.detail [data-testid=attempt-fidelity]`), tt.class)
		}
	}
	p.openRow("/unreported")
	p.waitFor("the attempt of /unreported", `document.querySelector('.detail [data-testid=attempt-status]')?.textContent === '200'`)
	if n := eval[int](p, `document.querySelectorAll('.detail [data-testid=attempt-fidelity]').length`); n != 0 {
		t.Errorf("an attempt without a receipt shows %d fidelity badges", n)
	}
}
