package systemtest

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

const forwardRequestsSubscription = `subscription($e: ID!){ forwardRequests(endpointId: $e){ attemptId deliveryId method path headers{ name value } bodyBase64 } }`

const deliveriesSubscription = `subscription($a: ID!){ deliveries(address: $a){ id path } }`

// sameRefusal checks that two refusals read the same once the ids they
// were about are blanked out: a foreign id must look like an unknown one.
func sameRefusal(t *testing.T, what string, foreign, unknown harness.GQLError, foreignID, unknownID string) {
	t.Helper()
	f, _ := json.Marshal(foreign)
	u, _ := json.Marshal(unknown)
	fText := strings.ReplaceAll(string(f), foreignID, "<id>")
	uText := strings.ReplaceAll(string(u), unknownID, "<id>")
	if fText != uText {
		t.Errorf("%s: another account's id is refused as %s, an unknown id as %s", what, fText, uText)
	}
	if foreign.Code() != "NOT_FOUND" {
		t.Errorf("%s: code %q, want NOT_FOUND", what, foreign.Code())
	}
}

// TestTenantIsolation: account B can neither see nor touch anything of
// account A's, and every refusal reads exactly like one for an unknown id.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "a")
	b := signUpTenant(t, r, "b")
	epA := createEndpointFor(t, r, a.Token, map[string]any{"name": "a's", "mode": "LOG"})
	epB := createEndpointFor(t, r, b.Token, map[string]any{"name": "b's", "mode": "LOG"})
	send(t, r, epA.ID, "POST", "/private", nil, []byte(`{"secret":"a"}`))
	dA := deliveryAt(t, r, a.Token, epA.ID, "/private")
	noEP, noDelivery := unknownAddress(), unknownDelivery()

	t.Run("reads", func(t *testing.T) {
		for _, id := range []string{epA.ID, noEP} {
			if ep := endpointByID(t, r, b.Token, id); ep != nil {
				t.Errorf("endpoint(%s) for B = %+v, want null", id, ep)
			}
		}
		for _, id := range []string{dA.ID, noDelivery} {
			if d := deliveryByID(t, r, b.Token, id); d != nil {
				t.Errorf("delivery(%s) for B = %+v, want null", id, d)
			}
		}
		var list struct{ Endpoints []endpointInfo }
		r.MustGraphQL(t, b.Token, `{ endpoints{ `+endpointFields+` } }`, nil, &list)
		if len(list.Endpoints) != 1 || list.Endpoints[0].ID != epB.ID {
			t.Errorf("B's endpoints = %+v, want only %s", list.Endpoints, epB.ID)
		}
		var me struct{ Me struct{ ID string } }
		r.MustGraphQL(t, b.Token, `{ me{ id } }`, nil, &me)
		if me.Me.ID != b.ID {
			t.Errorf("me for B's token = %q, want %q", me.Me.ID, b.ID)
		}
	})

	t.Run("mutations", func(t *testing.T) {
		ops := []struct {
			name, query    string
			foreign, unknw string
			vars           func(id string) map[string]any
		}{
			{"updateEndpoint", `mutation($id: ID!){ updateEndpoint(id: $id, input: {name: "taken"}){ id } }`, epA.ID, noEP,
				func(id string) map[string]any { return map[string]any{"id": id} }},
			{"updateEndpoint to PROXY", `mutation($id: ID!){ updateEndpoint(id: $id, input: {mode: PROXY, target: "127.0.0.1:9"}){ id } }`, epA.ID, noEP,
				func(id string) map[string]any { return map[string]any{"id": id} }},
			{"deleteEndpoint", `mutation($id: ID!){ deleteEndpoint(id: $id) }`, epA.ID, noEP,
				func(id string) map[string]any { return map[string]any{"id": id} }},
			{"retryDelivery", retryMutation, dA.ID, noDelivery,
				func(id string) map[string]any { return map[string]any{"id": id} }},
		}
		for _, op := range ops {
			foreign := refusal(t, r, b.Token, op.query, op.vars(op.foreign))
			unknown := refusal(t, r, b.Token, op.query, op.vars(op.unknw))
			sameRefusal(t, op.name, foreign, unknown, op.foreign, op.unknw)
		}
		ep := endpointByID(t, r, a.Token, epA.ID)
		if ep == nil || ep.Name != "a's" || ep.Mode != "LOG" {
			t.Errorf("A's endpoint after B's attempts: %+v", ep)
		}
		if d := deliveryByID(t, r, a.Token, dA.ID); d == nil || len(d.Attempts) != 0 {
			t.Errorf("A's delivery after B's attempts: %+v", d)
		}
	})

	t.Run("subscriptions", func(t *testing.T) {
		for _, s := range []struct{ name, query, varName string }{
			{"deliveries", deliveriesSubscription, "a"},
			{"forwardRequests", forwardRequestsSubscription, "e"},
		} {
			errOf := func(id string) harness.GQLError {
				sub := r.Subscribe(t, b.Token, s.query, map[string]any{s.varName: id})
				defer sub.Close()
				err := sub.Err(t, 10*time.Second)
				return harness.GQLError{Message: err.Error(), Extensions: map[string]any{"code": codeIn(err.Error())}}
			}
			sameRefusal(t, s.name, errOf(epA.ID), errOf(noEP), epA.ID, noEP)
		}
		if ep := endpointByID(t, r, a.Token, epA.ID); ep == nil || ep.AgentConnected {
			t.Errorf("B's forwardRequests attached to A's endpoint: %+v", ep)
		}
	})

	t.Run("no or bad token", func(t *testing.T) {
		ops := []struct {
			name, query string
			vars        map[string]any
		}{
			{"endpoints", `{ endpoints{ id } }`, nil},
			{"endpoint", `query($id: ID!){ endpoint(id: $id){ id } }`, map[string]any{"id": epA.ID}},
			{"createEndpoint", `mutation{ createEndpoint(input: {name: "x", mode: LOG}){ id } }`, nil},
			{"updateEndpoint", `mutation($id: ID!){ updateEndpoint(id: $id, input: {name: "x"}){ id } }`, map[string]any{"id": epA.ID}},
			{"deleteEndpoint", `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": epA.ID}},
			{"retryDelivery", retryMutation, map[string]any{"id": dA.ID}},
			{"completeForward", `mutation{ completeForward(input: {attemptId: "x", status: 200}) }`, nil},
		}
		for _, token := range []string{"", "rly_" + strings.Repeat("a", 52), "not a token"} {
			for _, op := range ops {
				if got := refusal(t, r, token, op.query, op.vars); got.Code() != "UNAUTHENTICATED" {
					t.Errorf("%s with token %q: code %q (%s), want UNAUTHENTICATED", op.name, token, got.Code(), got.Message)
				}
			}
			sub := r.Subscribe(t, token, forwardRequestsSubscription, map[string]any{"e": epA.ID})
			if err := sub.Err(t, 10*time.Second); !strings.Contains(err.Error(), "UNAUTHENTICATED") {
				t.Errorf("forwardRequests with token %q: %v, want UNAUTHENTICATED", token, err)
			}
			sub.Close()
		}
		if ep := endpointByID(t, r, a.Token, epA.ID); ep == nil || ep.Name != "a's" {
			t.Errorf("A's endpoint changed: %+v", ep)
		}
	})
}

// codeIn finds the extensions code in a subscription refusal's text.
func codeIn(s string) string {
	for _, c := range []string{"UNAUTHENTICATED", "NOT_FOUND", "INVALID_INPUT", "INTERNAL"} {
		if strings.Contains(s, c) {
			return c
		}
	}
	return ""
}

// TestTenantCannotCompleteAnotherAccountsForward: an attempt pending for
// account A's agent cannot be answered by account B.
func TestTenantCannotCompleteAnotherAccountsForward(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "a")
	b := signUpTenant(t, r, "b")
	ep := proxyEndpoint(t, r, a.Token, "127.0.0.1:9", false)
	// The test itself is A's agent, to hold the attempt open.
	work := r.Subscribe(t, a.Token, forwardRequestsSubscription, map[string]any{"e": ep.ID})
	waitAgent(t, r, a.Token, ep.ID, true)

	answered := make(chan harness.Response, 1)
	go func() {
		resp, err := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: "/pending", Host: r.AddressHost(ep.ID), Body: []byte("p")})
		if err != nil {
			resp = harness.Response{Status: -1, Body: []byte(err.Error())}
		}
		answered <- resp
	}()
	var fr struct {
		ForwardRequests struct{ AttemptID, DeliveryID, Path string }
	}
	if err := json.Unmarshal(work.Next(t, 10*time.Second), &fr); err != nil || fr.ForwardRequests.Path != "/pending" {
		t.Fatalf("forward request %+v (%v)", fr, err)
	}
	const complete = `mutation($in: CompleteForwardInput!){ completeForward(input: $in) }`
	in := func(attempt, body string) map[string]any {
		return map[string]any{"in": map[string]any{"attemptId": attempt, "status": 200, "bodyBase64": base64.StdEncoding.EncodeToString([]byte(body))}}
	}
	unknownAttempt := unknownDelivery()
	sameRefusal(t, "completeForward",
		refusal(t, r, b.Token, complete, in(fr.ForwardRequests.AttemptID, "from B")),
		refusal(t, r, b.Token, complete, in(unknownAttempt, "from B")),
		fr.ForwardRequests.AttemptID, unknownAttempt)
	if d := deliveryByID(t, r, b.Token, fr.ForwardRequests.DeliveryID); d != nil {
		t.Errorf("B reads A's pending delivery: %+v", d)
	}

	r.MustGraphQL(t, a.Token, complete, map[string]any{"in": map[string]any{
		"attemptId": fr.ForwardRequests.AttemptID, "status": 201,
		"headers":    []map[string]string{{"name": "X-From", "value": "A"}},
		"bodyBase64": base64.StdEncoding.EncodeToString([]byte("from A")),
	}}, nil)
	select {
	case resp := <-answered:
		if resp.Status != 201 || string(resp.Body) != "from A" || resp.Header.Get("X-From") != "A" {
			t.Fatalf("sender got %d %q %v, want A's 201 from A", resp.Status, resp.Body, resp.Header)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the sender got no answer")
	}
}

// TestTenantTokensNotStoredInClear reads every file of the data folder,
// while the relay runs and after a clean stop, for any form of a token.
func TestTenantTokensNotStoredInClear(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir)
	marker := "token-check-" + unknownAddress()
	accts := []tenant{signUpTenant(t, r, marker), signUpTenant(t, r, "second")}
	for _, acct := range accts {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "e", "mode": "LOG"})
		send(t, r, ep.ID, "POST", "/x", [][2]string{{"Authorization", "Bearer other"}}, []byte("{}"))
		deliveryAt(t, r, acct.Token, ep.ID, "/x")
	}

	forms := func(token string) map[string][]byte {
		out := map[string][]byte{
			"token":              []byte(token),
			"base64(token)":      []byte(base64.StdEncoding.EncodeToString([]byte(token))),
			"raw base64(token)":  []byte(base64.RawStdEncoding.EncodeToString([]byte(token))),
			"base64url(token)":   []byte(base64.RawURLEncoding.EncodeToString([]byte(token))),
			"hex(token)":         []byte(hex.EncodeToString([]byte(token))),
			"token without rly_": []byte(strings.TrimPrefix(token, "rly_")),
		}
		secret := strings.ToUpper(strings.TrimPrefix(token, "rly_"))
		if raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret); err == nil {
			out["token bytes"] = raw
			out["base64(token bytes)"] = []byte(base64.StdEncoding.EncodeToString(raw))
			out["hex(token bytes)"] = []byte(hex.EncodeToString(raw))
		}
		return out
	}
	scan := func(when string) {
		t.Helper()
		files := 0
		sawMarker := false
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			sawMarker = sawMarker || bytes.Contains(data, []byte(marker))
			for _, acct := range accts {
				for name, form := range forms(acct.Token) {
					if bytes.Contains(data, form) {
						t.Errorf("%s: %s of a token is in %s", when, name, path)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: read data folder: %v", when, err)
		}
		if !sawMarker {
			t.Fatalf("%s: the account name is in none of %d files; the scan reads the wrong data", when, files)
		}
		t.Logf("%s: scanned %d files", when, files)
	}
	scan("running")
	r.Stop(t)
	scan("stopped")
}

// TestTenantEventsLogHidesOtherAccounts: the events query must not show
// one account's deliveries to another account or to anyone without a token.
func TestTenantEventsLogHidesOtherAccounts(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "a")
	b := signUpTenant(t, r, "b")
	epA := createEndpointFor(t, r, a.Token, map[string]any{"name": "a's", "mode": "LOG"})
	marker := "a-private-" + unknownAddress()
	send(t, r, epA.ID, "POST", "/private", [][2]string{{"X-Private", marker}}, []byte(`{"card":"`+marker+`"}`))
	deliveryAt(t, r, a.Token, epA.ID, "/private")

	const query = `{ events(first: 25){ nodes{ stream type data } } }`
	if res := r.GraphQL(t, "", query, nil); len(res.Errors) == 0 || res.Errors[0].Code() != "UNAUTHENTICATED" {
		t.Errorf("events without a token: %+v, want UNAUTHENTICATED", res.Errors)
	}
	for _, who := range []struct{ name, id, token string }{{"account B", b.ID, b.Token}} {
		res := r.GraphQL(t, who.token, query, nil)
		if len(res.Errors) > 0 {
			t.Fatalf("%s reading its own log: %+v", who.name, res.Errors)
		}
		var out struct {
			Events struct{ Nodes []logEvent }
		}
		if err := json.Unmarshal(res.Data, &out); err != nil {
			t.Fatalf("decode events: %v", err)
		}
		own := 0
		for _, e := range out.Events.Nodes {
			if strings.Contains(e.Stream, who.id) {
				own++
			}
		}
		if own == 0 {
			t.Errorf("%s reads none of its own events: the check below would pass on an empty log", who.name)
		}
		leaks := 0
		for _, e := range out.Events.Nodes {
			if strings.Contains(e.Data, marker) || strings.Contains(e.Stream, epA.ID) || strings.Contains(e.Data, epA.ID) {
				if leaks++; leaks <= 2 {
					t.Errorf("%s reads account A's %s event on %s: %.300s", who.name, e.Type, e.Stream, e.Data)
				}
			}
		}
		if leaks > 0 {
			t.Errorf("%s reads %d events of account A", who.name, leaks)
		}
	}
}
