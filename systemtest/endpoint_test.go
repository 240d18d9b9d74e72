package systemtest

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

const updateEndpointMutation = `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ ` + endpointFields + ` } }`

// TestEndpointLifecycle covers an Endpoint's settings, its LOG mode and
// its deletion against one relay.
func TestEndpointLifecycle(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "owner")

	t.Run("targets outside the machine are refused", func(t *testing.T) {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "valid", "mode": "PROXY", "target": "localhost:3000"})
		for _, target := range []string{"10.0.0.1:80", "127.0.0.1:0", "127.0.0.1:65536", "example.com:80", "127.0.0.1", "[::1]:80", "127.0.0.1:80/x", "http://127.0.0.1:80"} {
			for name, op := range map[string]struct {
				query string
				vars  map[string]any
			}{
				"create": {`mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ id } }`,
					map[string]any{"in": map[string]any{"name": "bad", "mode": "PROXY", "target": target}}},
				"update": {updateEndpointMutation, map[string]any{"id": ep.ID, "in": map[string]any{"target": target}}},
			} {
				got := refusal(t, r, acct.Token, op.query, op.vars)
				if got.Code() != "INVALID_INPUT" || got.Extensions["field"] != "target" {
					t.Errorf("%s with target %q: code %q field %v (%s), want INVALID_INPUT on target",
						name, target, got.Code(), got.Extensions["field"], got.Message)
				}
			}
		}
		got := refusal(t, r, acct.Token, `mutation{ createEndpoint(input: {name: "no target", mode: PROXY}){ id } }`, nil)
		if got.Code() != "INVALID_INPUT" || got.Extensions["field"] != "target" {
			t.Errorf("PROXY without a target: code %q field %v", got.Code(), got.Extensions["field"])
		}
		if after := endpointByID(t, r, acct.Token, ep.ID); after == nil || after.Target == nil || *after.Target != "localhost:3000" {
			t.Errorf("a refused update changed the endpoint: %+v", after)
		}
	})

	t.Run("the same settings append no event", func(t *testing.T) {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "same", "mode": "PROXY", "target": "127.0.0.1:4000", "responseCapture": true})
		stream := "endpoint-" + ep.ID
		before := logEvents(t, r, acct.Token)
		same := map[string]any{"name": "same", "mode": "PROXY", "target": "127.0.0.1:4000", "responseCapture": true}
		for _, in := range []map[string]any{same, {}, {"name": "same"}, {"mode": "PROXY", "responseCapture": true}} {
			r.MustGraphQL(t, acct.Token, updateEndpointMutation, map[string]any{"id": ep.ID, "in": in}, nil)
		}
		after := logEvents(t, r, acct.Token)
		if len(after) != len(before) {
			t.Errorf("updates with the same settings appended %d events: %v", len(after)-len(before), streamTypes(after, stream))
		}
		// A real change does append one.
		var out struct{ UpdateEndpoint endpointInfo }
		r.MustGraphQL(t, acct.Token, updateEndpointMutation, map[string]any{"id": ep.ID, "in": map[string]any{"name": "renamed"}}, &out)
		if out.UpdateEndpoint.Name != "renamed" {
			t.Errorf("rename answered %+v", out.UpdateEndpoint)
		}
		types := streamTypes(logEvents(t, r, acct.Token), stream)
		if len(types) != 2 || types[1] != "endpoint.reconfigured.v1" {
			t.Errorf("events of %s = %v, want created then one reconfigured", stream, types)
		}
	})

	t.Run("LOG mode records and answers 204", func(t *testing.T) {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "log", "mode": "LOG"})
		if ep.Mode != "LOG" || !strings.Contains(ep.URL, ep.ID+".localhost") {
			t.Errorf("created %+v", ep)
		}
		resp := send(t, r, ep.ID, "PUT", "/log/me?x=1", [][2]string{{"X-A", "1"}}, []byte("caf\xc3\xa9\r\n"))
		if resp.Status != 204 || len(resp.Body) != 0 {
			t.Fatalf("LOG endpoint answered %d %q, want 204 and no body", resp.Status, resp.Body)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, "/log/me?x=1")
		body, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
		if *d.ResponseStatus != 204 || d.Method != "PUT" || string(body) != "caf\xc3\xa9\r\n" || len(d.Attempts) != 0 || d.Address != ep.ID {
			t.Errorf("recorded %+v, want PUT, the body, 204 and no attempt", d)
		}
	})

	t.Run("a deleted Endpoint answers 503 and reads as null", func(t *testing.T) {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "doomed", "mode": "LOG"})
		if resp := send(t, r, ep.ID, "POST", "/alive", nil, nil); resp.Status != 204 {
			t.Fatalf("before delete: %d", resp.Status)
		}
		var del struct{ DeleteEndpoint bool }
		r.MustGraphQL(t, acct.Token, `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": ep.ID}, &del)
		if !del.DeleteEndpoint {
			t.Fatalf("deleteEndpoint answered false")
		}
		resp := send(t, r, ep.ID, "POST", "/gone", nil, []byte("{}"))
		if resp.Status != 503 || !strings.HasPrefix(string(resp.Body), "No agent for client") {
			t.Errorf("deleted endpoint answered %d %q, want 503 No agent for client", resp.Status, resp.Body)
		}
		if got := endpointByID(t, r, acct.Token, ep.ID); got != nil {
			t.Errorf("endpoint(id) after delete = %+v, want null", got)
		}
		var list struct{ Endpoints []endpointInfo }
		r.MustGraphQL(t, acct.Token, `{ endpoints{ id } }`, nil, &list)
		for _, e := range list.Endpoints {
			if e.ID == ep.ID {
				t.Errorf("endpoints still lists the deleted endpoint")
			}
		}
		for _, q := range []string{
			`mutation($id: ID!){ deleteEndpoint(id: $id) }`,
			`mutation($id: ID!){ updateEndpoint(id: $id, input: {name: "back"}){ id } }`,
		} {
			if got := refusal(t, r, acct.Token, q, map[string]any{"id": ep.ID}); got.Code() != "NOT_FOUND" {
				t.Errorf("%s on a deleted endpoint: %q (%s), want NOT_FOUND", q, got.Code(), got.Message)
			}
		}
	})
}

// printedToken returns the token `relay accounts create` printed in out.
func printedToken(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "token "); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no token line in:\n%s", out)
	return ""
}

// TestAccountsCreateThroughTheRunningServer: with --signup=false, the
// operator creates an account on the running relay with its admin token; a
// wrong or missing admin token is refused, and the new token works at once.
func TestAccountsCreateThroughTheRunningServer(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--signup=false", "--admin-token", "ops-secret")
	server := r.BareURL()
	for _, tok := range []string{"", "wrong"} {
		out, code := harness.RunCLI(t, "accounts", "create", "--name", "Intruder", "--server", server, "--admin-token", tok)
		if code == 0 || !strings.Contains(out, "UNAUTHENTICATED") {
			t.Errorf("admin token %q: exit %d, want a refusal naming UNAUTHENTICATED:\n%s", tok, code, out)
		}
	}
	out, code := harness.RunCLI(t, "accounts", "create", "--name", "Ops Team", "--server", server, "--admin-token", "ops-secret")
	if code != 0 {
		t.Fatalf("relay accounts create exited %d:\n%s", code, out)
	}
	token := printedToken(t, out)
	var me struct{ Me *struct{ ID, Name string } }
	r.MustGraphQL(t, token, `{ me{ id name } }`, nil, &me)
	if me.Me == nil || me.Me.Name != "Ops Team" {
		t.Fatalf("me with the printed token = %+v, want Ops Team", me.Me)
	}
	// An account's own token is not the operator's.
	if got := refusal(t, r, token, `mutation{ createAccount(name: "x"){ token } }`, nil); got.Code() != "UNAUTHENTICATED" {
		t.Errorf("createAccount with an account token: %q (%s), want UNAUTHENTICATED", got.Code(), got.Message)
	}
}

// TestAccountsCreateWhenSignupClosed: with --signup=false only the
// operator's `relay accounts create` makes accounts, and its token works.
func TestAccountsCreateWhenSignupClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir, "--signup=false")
	got := refusal(t, r, "", `mutation{ signUp(name: "walk-in"){ token } }`, nil)
	if got.Code() == "" || got.Code() == "INTERNAL" {
		t.Errorf("closed sign-up refused with code %q (%s), want a clear refusal", got.Code(), got.Message)
	}
	t.Logf("signUp refused: %s (%s)", got.Code(), got.Message)
	r.Stop(t)

	out, code := harness.RunCLI(t, "accounts", "create", "--name", "Ops Team", "--data", dir)
	if code != 0 {
		t.Fatalf("relay accounts create exited %d:\n%s", code, out)
	}
	token := printedToken(t, out)

	r.Restart(t)
	var me struct{ Me *struct{ ID, Name string } }
	r.MustGraphQL(t, token, `{ me{ id name } }`, nil, &me)
	if me.Me == nil || me.Me.Name != "Ops Team" {
		t.Fatalf("me with the printed token = %+v, want Ops Team", me.Me)
	}
	ep := createEndpointFor(t, r, token, map[string]any{"name": "ops", "mode": "LOG"})
	if resp := send(t, r, ep.ID, "POST", "/ops", nil, nil); resp.Status != 204 {
		t.Errorf("the operator's endpoint answered %d", resp.Status)
	}
	if got := refusal(t, r, "", `mutation{ signUp(name: "walk-in"){ token } }`, nil); got.Code() == "" {
		t.Errorf("sign-up opened after a restart")
	}
}
