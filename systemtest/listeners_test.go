package systemtest

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// answeringTarget is a local server recording what it gets and answering
// status with body.
func answeringTarget(t *testing.T, status int, body string) (*requestLog, string) {
	t.Helper()
	log := &requestLog{}
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		log.add(r, b)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	_, port, _ := strings.Cut(target, ":")
	return log, port
}

// apiListener is one of Endpoint.listeners.
type apiListener struct {
	AgentID string
	Target  string
	Primary bool
	Node    string
	Filters []struct{ Text string }
}

func endpointListeners(t *testing.T, r *harness.Relay, token, id string) []apiListener {
	t.Helper()
	var out struct {
		Endpoint struct{ Listeners []apiListener }
	}
	r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ listeners{ agentId target primary node filters{ text } } } }`, map[string]any{"id": id}, &out)
	return out.Endpoint.Listeners
}

// apiAttempts reads a delivery's status and attempts with their roles.
type apiRoles struct {
	ResponseStatus *int
	Attempts       []struct {
		Status   *int
		Role     string
		AgentID  *string
		Fidelity struct{ Status string }
	}
}

func deliveryRoles(t *testing.T, r *harness.Relay, token, id string) apiRoles {
	t.Helper()
	var out struct{ Delivery apiRoles }
	r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ responseStatus attempts{ status role agentId fidelity{ status } } } }`, map[string]any{"id": id}, &out)
	return out.Delivery
}

// TestTwoListenersPrimaryAndCopy: two `relay listen` on one Endpoint. The
// first connected is the primary: the sender gets its answer, the other
// listener's local process gets the request too, and the delivery holds
// two attempts, one a copy (whose 500 never reaches the sender). When the
// primary leaves, the other takes over: it says so, the API and `relay
// endpoints show` show it, and the log holds the change.
func TestTwoListenersPrimaryAndCopy(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	logA, portA := answeringTarget(t, 200, "from-a")
	logB, portB := answeringTarget(t, 500, "from-b")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "shared", "mode": "PROXY", "target": "localhost:" + portA})

	a := h.startIn(t, t.TempDir(), "listen", portA, "shared")
	waitOutput(t, a, regexp.MustCompile(`(?m)^endpoint shared \(`+ep.ID+`\): primary: this agent's answers go to the senders`))
	b := h.startIn(t, t.TempDir(), "listen", portB, "shared")
	waitOutput(t, b, regexp.MustCompile(`(?m)^endpoint shared \(`+ep.ID+`\): receives copies`))
	waitOutput(t, b, regexp.MustCompile(`note: 1 other listener already serves endpoint`))
	// A copy listener changes nothing of the Endpoint: its stored target
	// is still the primary's.
	if e := endpointByID(t, r, acct.Token, ep.ID); e == nil || e.Target == nil || !strings.HasSuffix(*e.Target, ":"+portA) || e.Mode != "PROXY" {
		t.Errorf("after a copy listener connected the Endpoint reads %+v, want its target still the primary's port %s", e, portA)
	}

	res := send(t, r, ep.ID, "POST", "/hook", [][2]string{{"Content-Type", "application/json"}}, []byte(`{"n":1}`))
	if res.Status != 200 || string(res.Body) != "from-a" {
		t.Fatalf("sender got %d %q, want the primary's 200 from-a", res.Status, res.Body)
	}
	id := waitOutput(t, a, regexp.MustCompile(`POST /hook → 200 \(\d+ ms\)  delivery (\S+)`))[1]
	// The copy listener's line says it is a copy; the primary's does not.
	waitOutput(t, b, regexp.MustCompile(`POST /hook → 500 \(\d+ ms\)  copy: not sent to the sender  delivery `+id))
	if len(logA.all()) != 1 || len(logB.all()) != 1 || string(logB.last(t).Body) != `{"n":1}` {
		t.Errorf("local processes got %d and %d requests, want 1 each", len(logA.all()), len(logB.all()))
	}
	var d apiRoles
	harness.Eventually(t, 10*time.Second, "two attempts, one a copy", func() bool {
		d = deliveryRoles(t, r, acct.Token, id)
		return len(d.Attempts) == 2 && d.Attempts[1].Status != nil
	})
	if intp(d.ResponseStatus) != "200" || d.Attempts[0].Role != "PRIMARY" || intp(d.Attempts[0].Status) != "200" ||
		d.Attempts[1].Role != "COPY" || intp(d.Attempts[1].Status) != "500" || d.Attempts[1].AgentID == nil ||
		*d.Attempts[0].AgentID == *d.Attempts[1].AgentID {
		t.Errorf("delivery %+v: want responseStatus 200, a PRIMARY 200 and a COPY 500 of another agent", d)
	}
	// Both listeners' agents report what they handed their local process,
	// and the copy's receipt is recorded beside the relay's digests as the
	// primary's is.
	if d.Attempts[0].Fidelity.Status != "IDENTICAL" || d.Attempts[1].Fidelity.Status != "IDENTICAL" {
		t.Errorf("fidelity of the primary %q and of the copy %q, want IDENTICAL both", d.Attempts[0].Fidelity.Status, d.Attempts[1].Fidelity.Status)
	}
	if out, code := h.run(t, "", "deliveries", "show", id); code != 0 || !regexp.MustCompile(`\(copy for listener \S+\)  fidelity identical`).MatchString(out) {
		t.Errorf("deliveries show: exit %d, want the copy's fidelity identical\n%s", code, out)
	}

	ls := endpointListeners(t, r, acct.Token, ep.ID)
	if len(ls) != 2 || !ls[0].Primary || ls[1].Primary || !strings.HasSuffix(ls[0].Target, ":"+portA) {
		t.Fatalf("listeners %+v: want the first (to port %s) primary", ls, portA)
	}
	var shown struct {
		jsonEndpoint
		Listeners []struct {
			AgentID     string `json:"agentId"`
			Target      string `json:"target"`
			Primary     bool   `json:"primary"`
			ConnectedAt string `json:"connectedAt"`
			Node        string `json:"node"`
			Filters     []struct {
				Text string `json:"text"`
			} `json:"filters"`
		} `json:"listeners"`
	}
	h.jsonOut(t, &shown, "endpoints", "show", "shared")
	if len(shown.Listeners) != 2 || !shown.Listeners[0].Primary || shown.Listeners[0].AgentID != ls[0].AgentID {
		t.Errorf("endpoints show -o json: %+v", shown.Listeners)
	}

	// The primary leaves: the other takes over.
	a.Stop(t)
	waitOutput(t, b, regexp.MustCompile(`(?m)^now primary on endpoint shared \(`+ep.ID+`\)`))
	harness.Eventually(t, 10*time.Second, "one listener left, the primary", func() bool {
		ls := endpointListeners(t, r, acct.Token, ep.ID)
		return len(ls) == 1 && ls[0].Primary && strings.HasSuffix(ls[0].Target, ":"+portB)
	})
	// Now the primary, its target is the Endpoint's.
	harness.Eventually(t, 10*time.Second, "the stored target to follow the new primary", func() bool {
		e := endpointByID(t, r, acct.Token, ep.ID)
		return e != nil && e.Target != nil && strings.HasSuffix(*e.Target, ":"+portB)
	})
	if out, code := h.run(t, "", "endpoints", "show", "shared"); code != 0 || !regexp.MustCompile(`\S+/`+ep.ID+`\s+primary\s+\S+:`+portB).MatchString(out) {
		t.Errorf("endpoints show: exit %d, want the listener to port %s primary:\n%s", code, portB, out)
	}
	res = send(t, r, ep.ID, "POST", "/after", nil, []byte(`{"n":2}`))
	if res.Status != 500 || string(res.Body) != "from-b" {
		t.Errorf("after the primary left the sender got %d %q, want the new primary's 500 from-b", res.Status, res.Body)
	}
	if m := waitOutput(t, b, regexp.MustCompile(`POST /after → 500 .*`)); strings.Contains(m[0], "copy") {
		t.Errorf("the primary's line says copy: %q", m[0])
	}
	exported, _ := harness.RunCLI(t, "events", "export", "--data", r.Data)
	if !regexp.MustCompile(`listener\.primary_changed\.v1.*"previous":"` + regexp.QuoteMeta(ls[0].AgentID) + `","reason":"primary left"`).MatchString(exported) {
		t.Errorf("the log holds no PrimaryChanged from %s (primary left):\n%s", ls[0].AgentID, exported)
	}
}

// TestListenFilters: a listener with filters gets only what matches; a
// delivery nothing matches is recorded, answered as a LOG Endpoint (204)
// and explained as filtered with the reason. --events is the short form
// of the provider's event type (Stripe's type here); JSON fields use
// dotted paths; headers match any of their values. Invalid filters are
// refused with exit code 2 naming the fault.
func TestListenFilters(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	stripeLog, stripePort := answeringTarget(t, 200, "stripe ok")
	ghLog, ghPort := answeringTarget(t, 200, "gh ok")
	stripe := createEndpointFor(t, r, acct.Token, map[string]any{"name": "stripe", "mode": "PROXY", "target": "localhost:" + stripePort})
	gh := createEndpointFor(t, r, acct.Token, map[string]any{"name": "gh", "mode": "PROXY", "target": "localhost:" + ghPort})

	s := h.startIn(t, t.TempDir(), "listen", stripePort, "stripe", "--events", "charge.succeeded,invoice.paid", "--filter", "json:data.object.status=succeeded")
	waitOutput(t, s, regexp.MustCompile(`(?m)^endpoint stripe .*: primary`))
	g := h.startIn(t, t.TempDir(), "listen", ghPort, "gh", "--filter", "header:X-GitHub-Event=push,pull_request", "--filter", "method=POST")
	waitOutput(t, g, regexp.MustCompile(`(?m)^endpoint gh .*: primary`))
	ls := endpointListeners(t, r, acct.Token, stripe.ID)
	if len(ls) != 1 || len(ls[0].Filters) != 2 || ls[0].Filters[0].Text != "event=charge.succeeded,invoice.paid" || ls[0].Filters[1].Text != "json:data.object.status=succeeded" {
		t.Errorf("stripe listeners %+v", ls)
	}

	sig := [][2]string{{"Stripe-Signature", "t=1,v1=0"}, {"Content-Type", "application/json"}}
	event := func(typ, status string) []byte {
		return []byte(`{"id":"evt_` + typ + status + `","type":"` + typ + `","data":{"object":{"status":"` + status + `"}}}`)
	}
	seen := map[string]bool{}
	if res := send(t, r, stripe.ID, "POST", "/stripe", sig, event("charge.succeeded", "succeeded")); res.Status != 200 || string(res.Body) != "stripe ok" {
		t.Fatalf("matching Stripe event: %d %q, want it forwarded", res.Status, res.Body)
	}
	newestDelivery(t, r, acct.Token, stripe.ID, seen)
	for _, c := range []struct {
		body []byte
		why  string
	}{
		{event("charge.failed", "failed"), "no listener matched: event=charge.failed not in [charge.succeeded,invoice.paid]"},
		{event("invoice.paid", "open"), "no listener matched: json data.object.status=open not in [succeeded]"},
	} {
		res := send(t, r, stripe.ID, "POST", "/stripe", sig, c.body)
		if res.Status != 204 {
			t.Errorf("filtered Stripe event %s: %d %q, want 204 as a LOG Endpoint answers", c.body, res.Status, res.Body)
		}
		id := newestDelivery(t, r, acct.Token, stripe.ID, seen)
		x := explainOf(t, r, acct.Token, id)
		if intp(x.ResponseStatus) != "204" || !strings.Contains(x.Why.Summary, "filtered, not forwarded: "+c.why) {
			t.Errorf("explanation of %s: %+v, want it filtered: %s", id, x, c.why)
		}
		if out, code := h.run(t, "", "deliveries", "explain", id); code != 0 || !strings.Contains(out, c.why) {
			t.Errorf("deliveries explain %s: exit %d\n%s", id, code, out)
		}
	}
	if n := len(stripeLog.all()); n != 1 {
		t.Errorf("the Stripe target got %d requests, want only the matching one", n)
	}

	if res := send(t, r, gh.ID, "POST", "/gh", [][2]string{{"X-GitHub-Event", "issues"}}, []byte(`{}`)); res.Status != 204 {
		t.Errorf("filtered GitHub event: %d %q", res.Status, res.Body)
	}
	if x := explainOf(t, r, acct.Token, newestDelivery(t, r, acct.Token, gh.ID, seen)); !strings.Contains(x.Why.Summary, "header X-GitHub-Event=issues not in [push,pull_request]") {
		t.Errorf("explanation of the filtered GitHub event: %q", x.Why.Summary)
	}
	if res := send(t, r, gh.ID, "POST", "/gh", [][2]string{{"X-GitHub-Event", "pull_request"}}, []byte(`{}`)); res.Status != 200 || string(res.Body) != "gh ok" {
		t.Errorf("matching GitHub event: %d %q", res.Status, res.Body)
	}
	if n := len(ghLog.all()); n != 1 || ghLog.last(t).Header.Get("X-GitHub-Event") != "pull_request" {
		t.Errorf("the GitHub target got %d requests, want only the pull_request", n)
	}
	newestDelivery(t, r, acct.Token, gh.ID, seen)

	// The Endpoint's own filters apply before any listener's.
	if out, code := h.run(t, "", "endpoints", "update", "gh", "--filter", "path=/gh/*"); code != 0 || !strings.Contains(out, "filters: path=/gh/*") {
		t.Fatalf("endpoints update --filter: exit %d\n%s", code, out)
	}
	if res := send(t, r, gh.ID, "POST", "/gh", [][2]string{{"X-GitHub-Event", "push"}}, []byte(`{}`)); res.Status != 204 {
		t.Errorf("a delivery the Endpoint's filters refuse: %d %q, want 204", res.Status, res.Body)
	}
	if x := explainOf(t, r, acct.Token, newestDelivery(t, r, acct.Token, gh.ID, seen)); !strings.Contains(x.Why.Summary, "the Endpoint's filters: path=/gh not in [/gh/*]") {
		t.Errorf("explanation of a delivery the Endpoint's filters refused: %q", x.Why.Summary)
	}
	if res := send(t, r, gh.ID, "POST", "/gh/x", [][2]string{{"X-GitHub-Event", "push"}}, []byte(`{}`)); res.Status != 200 {
		t.Errorf("a delivery both filters match: %d %q, want 200", res.Status, res.Body)
	}
	var shownEp struct {
		Endpoint struct{ Filters []struct{ Kind, Text string } }
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ filters{ kind text } } }`, map[string]any{"id": gh.ID}, &shownEp)
	if f := shownEp.Endpoint.Filters; len(f) != 1 || f[0].Kind != "PATH" || f[0].Text != "path=/gh/*" {
		t.Errorf("Endpoint.filters %+v", f)
	}
	code := r.ErrorCode(t, acct.Token, `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ id } }`,
		map[string]any{"id": gh.ID, "in": map[string]any{"filters": []any{map[string]any{"kind": "JSON", "values": []string{"x"}}}}})
	if code != "INVALID_INPUT" {
		t.Errorf("updateEndpoint with a JSON filter without a path: %q, want INVALID_INPUT", code)
	}
	// The same filters in their text form, as the console's settings send them.
	for _, tt := range []struct {
		name string
		in   map[string]any
	}{
		{"an invalid text", map[string]any{"filterTexts": []string{"json:a..b=1"}}},
		{"a text with no '='", map[string]any{"filterTexts": []string{"method"}}},
		{"both forms", map[string]any{"filterTexts": []string{"method=POST"}, "filters": []any{map[string]any{"kind": "METHOD", "values": []string{"POST"}}}}},
	} {
		if code := r.ErrorCode(t, acct.Token, `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ id } }`,
			map[string]any{"id": gh.ID, "in": tt.in}); code != "INVALID_INPUT" {
			t.Errorf("updateEndpoint with %s: %q, want INVALID_INPUT", tt.name, code)
		}
	}
	var texts struct {
		UpdateEndpoint struct{ Filters []struct{ Kind, Text string } }
	}
	r.MustGraphQL(t, acct.Token, `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ filters{ kind text } } }`,
		map[string]any{"id": gh.ID, "in": map[string]any{"filterTexts": []string{" path=/gh/* "}}}, &texts)
	if f := texts.UpdateEndpoint.Filters; len(f) != 1 || f[0].Kind != "PATH" || f[0].Text != "path=/gh/*" {
		t.Errorf("updateEndpoint filterTexts: %+v, want path=/gh/*", f)
	}
	if out, code := h.run(t, "", "endpoints", "update", "gh", "--no-filters"); code != 0 || strings.Contains(out, "filters:") {
		t.Errorf("endpoints update --no-filters: exit %d\n%s", code, out)
	}
	if out, code := h.run(t, "", "endpoints", "update", "gh", "--filter", "json:a..b=1"); code != 2 || !strings.Contains(out, "empty segment") {
		t.Errorf("endpoints update with an invalid filter: exit %d, want 2:\n%s", code, out)
	}

	// The API refuses an invalid filter of a listener, naming it.
	sub := r.Subscribe(t, acct.Token, `subscription($e: ID!, $f: [FilterInput!]){ forwardRequests(endpointId: $e, filters: $f){ attemptId } }`,
		map[string]any{"e": gh.ID, "f": []any{map[string]any{"kind": "PATH", "values": []string{"hooks"}}}})
	err := sub.Err(t, 10*time.Second)
	sub.Close()
	if codeIn(err.Error()) != "INVALID_INPUT" || !strings.Contains(err.Error(), `path "hooks" does not start with /`) {
		t.Errorf("forwardRequests with an invalid filter: %v, want INVALID_INPUT naming it", err)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--filter", "json:=x"}, `invalid filter "json:=x": json needs a name`},
		{[]string{"--filter", "colour=red"}, `unknown kind "colour"`},
		{[]string{"--filter", "path=hooks"}, "does not start with /"},
		{[]string{"--filter", "header:X-A"}, "no '='"},
		{[]string{"--events", "charge.succeeded,,x"}, `--events "charge.succeeded,,x": invalid filter "event=charge.succeeded,,x": empty value`},
	} {
		out, code := h.run(t, "", append([]string{"listen", stripePort, "stripe"}, bad.args...)...)
		if code != 2 || !strings.Contains(out, bad.want) {
			t.Errorf("listen %v: exit %d, want 2 naming %q:\n%s", bad.args, code, bad.want, out)
		}
	}
}

// newestDelivery is the id of an Endpoint's newest delivery, once the
// views show one newer than those seen before (it records the id).
func newestDelivery(t *testing.T, r *harness.Relay, token, endpointID string, seen map[string]bool) string {
	t.Helper()
	id := ""
	harness.Eventually(t, 10*time.Second, "a new delivery of "+endpointID, func() bool {
		var out struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ ID string } }
			}
		}
		r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 1){ nodes{ id } } } }`, map[string]any{"id": endpointID}, &out)
		if n := out.Endpoint.Deliveries.Nodes; len(n) == 1 && !seen[n[0].ID] {
			id = n[0].ID
		}
		return id != ""
	})
	seen[id] = true
	return id
}

func explainOf(t *testing.T, r *harness.Relay, token, id string) apiExplanation {
	t.Helper()
	var x struct{ Delivery apiExplanation }
	r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ responseStatus explanation why{ status summary facts{ at text } } } }`, map[string]any{"id": id}, &x)
	return x.Delivery
}
