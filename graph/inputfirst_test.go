package graph_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ratelimit"
)

// TestRatedMutationsCheckInputFirst: every rated mutation checks its input
// before it takes from a rate, so malformed calls spend nothing: after
// five of them refused INVALID_INPUT, a well-formed call from the same
// client (or account) is still admitted, with every rate's burst below
// five.
func TestRatedMutationsCheckInputFirst(t *testing.T) {
	const refused = 5
	tight := ratelimit.Rate{N: 1, Per: 24 * time.Hour, Burst: 1} // sign-in: 4 per address
	for _, tt := range []struct {
		name string
		// setup makes what the calls need, from another address than
		// theirs, and returns the browser that calls and the variables
		// its well-formed call adds to the malformed one's.
		setup     func(t *testing.T, e *env, srv *httptest.Server, caller *browser) map[string]any
		mutation  string
		bad, good map[string]any
	}{
		{name: "signUp (anonymous rate)",
			mutation: `mutation($n: String!) { signUp(name: $n) { token } }`,
			bad:      map[string]any{"n": "   "}, good: map[string]any{"n": "Acme"}},
		{name: "signUpWithPassword (anonymous and sign-in rates)",
			mutation: `mutation($p: String!) { signUpWithPassword(name: "Acme", login: "ann@acme.test", password: $p) { member { id } } }`,
			bad:      map[string]any{"p": "short"}, good: map[string]any{"p": pw}},
		{name: "requestDeviceCode (anonymous rate)",
			mutation: `mutation($n: String!) { requestDeviceCode(clientName: $n) { userCode } }`,
			bad:      map[string]any{"n": ""}, good: map[string]any{"n": "laptop"}},
		{name: "setInspectorAnswer (anonymous rate)",
			setup: func(t *testing.T, e *env, _ *httptest.Server, _ *browser) map[string]any {
				t.Helper()
				var in struct{ CreateInspector struct{ ID string } }
				e.c.MustPost(`mutation { createInspector { id } }`, &in)
				return map[string]any{"id": in.CreateInspector.ID}
			},
			mutation: `mutation($id: ID!, $s: Int!) { setInspectorAnswer(id: $id, answer: {status: $s}) { id } }`,
			bad:      map[string]any{"s": 99}, good: map[string]any{"s": 200}},
		{name: "createToken (token rate)",
			setup: func(t *testing.T, e *env, _ *httptest.Server, caller *browser) map[string]any {
				t.Helper()
				caller.tok = e.signUp(t, "Acme")
				return nil
			},
			mutation: `mutation($n: String!) { createToken(name: $n) { secret } }`,
			bad:      map[string]any{"n": ""}, good: map[string]any{"n": "ci"}},
		{name: "setUpSignIn (sign-in rate)",
			setup: func(t *testing.T, e *env, _ *httptest.Server, caller *browser) map[string]any {
				t.Helper()
				caller.tok = e.signUp(t, "Legacy")
				return nil
			},
			mutation: `mutation($l: String!) { setUpSignIn(login: $l, password: "correct horse battery") { member { id } } }`,
			bad:      map[string]any{"l": " "}, good: map[string]any{"l": "old@legacy.test"}},
		{name: "changePassword (sign-in rate)",
			setup: func(t *testing.T, _ *env, srv *httptest.Server, caller *browser) map[string]any {
				t.Helper()
				caller.peer = "198.51.100.1"
				caller.signUp("Acme", "ann@acme.test")
				caller.peer = "198.51.100.2"
				return nil
			},
			mutation: `mutation($n: String!) { changePassword(currentPassword: "correct horse battery", newPassword: $n) }`,
			bad:      map[string]any{"n": "short"}, good: map[string]any{"n": "a better horse battery"}},
		{name: "redriveDeadPage (bulk rate)",
			setup: func(t *testing.T, e *env, _ *httptest.Server, caller *browser) map[string]any {
				t.Helper()
				caller.tok = e.signUp(t, "Acme")
				var ep struct{ CreateEndpoint struct{ ID string } }
				e.c.MustPost(`mutation { createEndpoint(input: {name: "q", mode: QUEUE}) { id } }`, &ep, bearerOpt(caller.tok))
				return map[string]any{"e": ep.CreateEndpoint.ID}
			},
			mutation: `mutation($e: ID!, $a: String) { redriveDeadPage(endpoint: $e, after: $a) { redriven } }`,
			bad:      map[string]any{"a": "not a cursor"}, good: map[string]any{"a": nil}},
		{name: "joinAccount (sign-in rate)",
			setup: func(t *testing.T, _ *env, srv *httptest.Server, _ *browser) map[string]any {
				t.Helper()
				owner := from(t, srv, "198.51.100.1")
				owner.signUp("Acme", "ann@acme.test")
				return map[string]any{"c": owner.invite()}
			},
			mutation: `mutation($c: String!, $p: String!) { joinAccount(code: $c, login: "bob@acme.test", password: $p) { member { id } } }`,
			bad:      map[string]any{"p": "short"}, good: map[string]any{"p": pw}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnvWith(t, nil, func(r *graph.Resolver) {
				r.Anonymous = ratelimit.NewKeyed(tight, 100)
				r.SignInRate = tight
				r.TokenRate = tight
				r.BulkRate = tight
			})
			srv := httptest.NewServer(peerHandler(e.h))
			t.Cleanup(srv.Close)
			caller := from(t, srv, "198.51.100.2")
			vars := map[string]any{}
			if tt.setup != nil {
				for k, v := range tt.setup(t, e, srv, caller) {
					vars[k] = v
				}
			}
			with := func(extra map[string]any) map[string]any {
				out := map[string]any{}
				for k, v := range vars {
					out[k] = v
				}
				for k, v := range extra {
					out[k] = v
				}
				return out
			}
			for i := range refused {
				if a := caller.do(tt.mutation, with(tt.bad), nil); a.code() != "INVALID_INPUT" {
					t.Errorf("malformed call %d: %+v, want INVALID_INPUT", i+1, a.Errors)
				}
			}
			a := caller.do(tt.mutation, with(tt.good), nil)
			t.Logf("after %d malformed calls, a well-formed one: %+v", refused, a.Errors)
			if len(a.Errors) > 0 {
				t.Errorf("after %d malformed calls refused, a well-formed one: %+v, want it admitted", refused, a.Errors)
			}
		})
	}
}
