package consoletest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestAttemptKindOfACopy: with two agents listening on an Endpoint, a
// delivery has the primary's attempt and a copy's; the attempt list names
// the copy "Copy", not "First".
func TestAttemptKindOfACopy(t *testing.T) {
	token := signUp(t, "Copies")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Two listeners", mode: PROXY, target: "127.0.0.1:9"}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID
	const sub = `subscription($e: ID!){ forwardRequests(endpointId: $e){ attemptId } }`
	first := srv.Subscribe(t, token, sub, map[string]any{"e": id})
	defer first.Close()
	harness.Eventually(t, 10*time.Second, "the first agent connected", func() bool {
		var out struct {
			Endpoint struct{ Listeners []struct{ AgentID string } }
		}
		srv.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ listeners { agentId } } }`, map[string]any{"id": id}, &out)
		return len(out.Endpoint.Listeners) == 1
	})
	second := srv.Subscribe(t, token, sub, map[string]any{"e": id})
	defer second.Close()
	harness.Eventually(t, 10*time.Second, "both agents connected", func() bool {
		var out struct {
			Endpoint struct{ Listeners []struct{ AgentID string } }
		}
		srv.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ listeners { agentId } } }`, map[string]any{"id": id}, &out)
		return len(out.Endpoint.Listeners) == 2
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = srv.TrySendRaw(harness.RawRequest{Method: "POST", Target: "/copied", Host: srv.AddressHost(id), Body: []byte(`{}`)})
	}()
	for _, w := range []*harness.Subscription{second, first} { // the copy's answer first: it waits for the primary's
		var fr struct{ ForwardRequests struct{ AttemptID string } }
		if err := json.Unmarshal(w.Next(t, 10*time.Second), &fr); err != nil {
			t.Fatal(err)
		}
		srv.MustGraphQL(t, token, `mutation($in: CompleteForwardInput!){ completeForward(input: $in) }`,
			map[string]any{"in": map[string]any{"attemptId": fr.ForwardRequests.AttemptID, "status": 200}}, nil)
	}
	<-done

	p := newPage(t, 1280, 800)
	p.open("/e/" + id + "#token=" + token)
	p.waitLive()
	p.openRow("/copied")
	kinds := `[...document.querySelectorAll('.detail [data-testid=attempt-kind]')].map(e => e.textContent.trim()).sort().join('|')`
	p.waitFor("two attempts listed", `document.querySelectorAll('.detail [data-testid=attempt-kind]').length === 2`)
	if got := eval[string](p, kinds); got != "Copy|First" {
		t.Errorf("attempt kinds = %q, want Copy|First", got)
	}
}
