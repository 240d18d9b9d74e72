package systemtest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestUnansweredHandshakeHints: a LOG Endpoint and a guest inspector that
// do not enable a provider's handshake answer its verification request as
// any other (204, which the provider takes as a failure), and the history
// says what it looked like and the command that enables it: the
// delivery's hint in the API, under the row in `relay tail`, and in the
// explanation. A plain webhook has none. Once the command from the hint
// is run, the same request is answered with the challenge.
func TestUnansweredHandshakeHints(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "chat", "mode": "LOG"})

	tail := h.startIn(t, t.TempDir(), "tail", "chat")
	waitOutput(t, tail, regexp.MustCompile(`tailing `))
	slack := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	jsonType := [][2]string{{"Content-Type", "application/json"}}
	if resp := send(t, r, ep.ID, "POST", "/slack/events", jsonType, slack); resp.Status != 204 {
		t.Fatalf("Slack's verification answered %d, want 204 (no handshake enabled)", resp.Status)
	}
	if resp := send(t, r, ep.ID, "GET", "/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatpopsicle", nil, nil); resp.Status != 204 {
		t.Fatalf("Meta's verification answered %d, want 204", resp.Status)
	}
	if resp := send(t, r, ep.ID, "POST", "/plain", jsonType, []byte(`{"type":"event_callback"}`)); resp.Status != 204 {
		t.Fatalf("a webhook answered %d, want 204", resp.Status)
	}

	slackHint := "hint: This looks like a Slack URL verification, which this address does not answer; enable the Slack handshake to answer it: relay endpoints update " +
		ep.ID + " --handshake slack"
	metaHint := "hint: This looks like a Meta verification (hub.challenge), which this address does not answer; enable the Meta handshake to answer it: relay endpoints update " +
		ep.ID + " --handshake meta --meta-verify-token-file FILE"
	waitOutput(t, tail, regexp.MustCompile(`POST /slack/events → 204  delivery \S+\n  `+regexp.QuoteMeta(slackHint)))
	waitOutput(t, tail, regexp.MustCompile(`GET /meta\?hub\.mode=subscribe\S* → 204  delivery \S+\n  `+regexp.QuoteMeta(metaHint)))
	m := waitOutput(t, tail, regexp.MustCompile(`POST /plain → 204  delivery \S+\n(.*)`))
	if strings.Contains(m[1], "hint") {
		t.Errorf("a plain webhook has a hint in tail: %q", m[0])
	}

	var out struct {
		Endpoint struct {
			Deliveries struct {
				Nodes []struct {
					Path string
					Hint *string
					Why  struct{ Summary string }
				}
			}
		}
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 10){ nodes{ path hint why{ summary } } } } }`,
		map[string]any{"id": ep.ID}, &out)
	hints := map[string]string{}
	for _, d := range out.Endpoint.Deliveries.Nodes {
		if d.Hint != nil {
			hints[d.Path] = *d.Hint
			if !strings.Contains(d.Why.Summary, *d.Hint) {
				t.Errorf("%s: the explanation %q does not carry the hint", d.Path, d.Why.Summary)
			}
		}
	}
	if len(out.Endpoint.Deliveries.Nodes) != 3 || len(hints) != 2 ||
		!strings.HasPrefix("hint: "+hints["/slack/events"], slackHint) ||
		!strings.HasPrefix("hint: "+hints["/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatpopsicle"], metaHint) {
		t.Errorf("hints in the API: %q", hints)
	}

	// The command from the hint makes the relay answer the handshake.
	if out, code := h.run(t, "", "endpoints", "update", ep.ID, "--handshake", "slack"); code != 0 {
		t.Fatalf("endpoints update --handshake slack: exit %d\n%s", code, out)
	}
	if resp := send(t, r, ep.ID, "POST", "/slack/events", jsonType, slack); resp.Status != 200 ||
		string(resp.Body) != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Errorf("after enabling the handshake Slack's verification answered %d %q, want 200 with the challenge", resp.Status, resp.Body)
	}

	// A guest inspector: its hint names the inspector's command.
	var ins struct{ CreateInspector struct{ ID string } }
	r.MustGraphQL(t, "", `mutation { createInspector { id } }`, nil, &ins)
	id := ins.CreateInspector.ID
	if resp := send(t, r, id, "POST", "/s", jsonType, slack); resp.Status != 204 {
		t.Fatalf("the inspector answered Slack's verification %d, want 204", resp.Status)
	}
	var got struct {
		Inspector struct {
			Deliveries struct{ Nodes []struct{ Hint *string } }
		}
	}
	harness.Eventually(t, 10*time.Second, "the inspector's delivery in its history", func() bool {
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(first: 1){ nodes{ hint } } } }`, map[string]any{"id": id}, &got)
		return len(got.Inspector.Deliveries.Nodes) == 1
	})
	if n := got.Inspector.Deliveries.Nodes; len(n) != 1 || n[0].Hint == nil || !strings.Contains(*n[0].Hint, "relay inspector answer "+id+" --handshake slack") {
		t.Errorf("inspector delivery hint: %+v", n)
	}
}
