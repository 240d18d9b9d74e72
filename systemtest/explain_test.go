package systemtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// apiExplanation is what the API says of why a delivery was answered.
type apiExplanation struct {
	ResponseStatus *int
	Explanation    string
	Why            struct {
		Status  *int
		Summary string
		Facts   []struct {
			At   time.Time
			Text string
		}
	}
}

// jsonExplanation is `relay deliveries explain -o json`.
type jsonExplanation struct {
	ID      string `json:"id"`
	Status  *int   `json:"status"`
	Summary string `json:"summary"`
	Facts   []struct {
		At   string `json:"at"`
		Text string `json:"text"`
	} `json:"facts"`
	Sender *struct {
		Status  int    `json:"status"`
		Attempt *int   `json:"attempt"`
		At      string `json:"at"`
	} `json:"sender"`
	SenderLost bool `json:"senderLost"`
	Shown      *struct {
		Status  int    `json:"status"`
		Attempt *int   `json:"attempt"`
		Kind    string `json:"kind"`
	} `json:"shown"`
}

// explained checks that delivery id is explained, through the API and
// through `relay deliveries explain` (text and -o json) of the real binary,
// as answered status (0: not answered yet), with a summary that says each
// of wants (and, when facts are given, facts that say each of them). cli
// are extra flags of the command (--ca-file). It returns what the API said.
func explained(t *testing.T, r *harness.Relay, token, id string, status int, wants []string, facts []string, cli ...string) apiExplanation {
	t.Helper()
	var out struct{ Delivery *apiExplanation }
	r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ responseStatus explanation why{ status summary facts{ at text } } } }`,
		map[string]any{"id": id}, &out)
	x := out.Delivery
	if x == nil {
		t.Fatalf("delivery %s reads as null", id)
	}
	t.Logf("delivery %s:\n%s", id, x.Explanation)
	if want := statusOrNull(status); intp(x.ResponseStatus) != want || intp(x.Why.Status) != want {
		t.Errorf("delivery %s: responseStatus %s, why.status %s; want %s", id, intp(x.ResponseStatus), intp(x.Why.Status), want)
	}
	for _, w := range wants {
		if !strings.Contains(x.Why.Summary, w) {
			t.Errorf("delivery %s: summary %q\ndoes not say %q", id, x.Why.Summary, w)
		}
	}
	for _, w := range facts {
		if !strings.Contains(x.Explanation, w) {
			t.Errorf("delivery %s: explanation\n%s\ndoes not say %q", id, x.Explanation, w)
		}
	}
	if !strings.HasPrefix(x.Explanation, x.Why.Summary+"\n") || len(x.Why.Facts) == 0 {
		t.Errorf("delivery %s: explanation %q is not the summary and its facts", id, x.Explanation)
	}

	h := newCLIHome(t)
	args := append([]string{"deliveries", "explain", id, "--server", r.BareURL(), "--token", token}, cli...)
	if token == "" {
		args = append([]string{"deliveries", "explain", id, "--server", r.BareURL()}, cli...)
	}
	text, code := h.run(t, "", args...)
	if code != 0 || !strings.HasPrefix(text, x.Why.Summary+"\n\n") || !strings.Contains(text, x.Why.Facts[0].Text) {
		t.Errorf("relay %s exited %d:\n%s\nwant the summary %q, then the facts", strings.Join(args, " "), code, text, x.Why.Summary)
	}
	jsonText, code := h.run(t, "", append(args, "-o", "json")...)
	var j jsonExplanation
	if code != 0 {
		t.Fatalf("relay %s -o json exited %d:\n%s", strings.Join(args, " "), code, jsonText)
	}
	decodeStrict(t, "deliveries explain", jsonText, &j)
	if j.ID != id || intp(j.Status) != statusOrNull(status) || j.Summary != x.Why.Summary || len(j.Facts) != len(x.Why.Facts) {
		t.Errorf("deliveries explain -o json %+v, want the API's %+v", j, x.Why)
	}
	if status != 0 && (j.Shown == nil || j.Shown.Status != status) {
		t.Errorf("deliveries explain -o json: shown %+v, want the status shown, %d", j.Shown, status)
	}
	return *x
}

// statusOrNull is status as intp prints it, 0 as null.
func statusOrNull(status int) string {
	if status == 0 {
		return "null"
	}
	return strconv.Itoa(status)
}

// inspectorDeliveryAt returns the newest delivery of an inspector sent to
// path, once it is answered.
func inspectorDeliveryAt(t *testing.T, r *harness.Relay, inspector, path string) delivery {
	t.Helper()
	var found delivery
	harness.Eventually(t, 10*time.Second, "a delivery to "+path+" of inspector "+inspector, func() bool {
		for _, d := range history(t, r, inspector, 50) {
			if d.Path == path && d.ResponseStatus != nil {
				found = d
				return true
			}
		}
		return false
	})
	return found
}

// TestExplainTheRelaysOwnAnswers: the relay explains, through the API and
// the command line, each answer it decides itself that the other system
// tests do not already explain: an inspector's 204 and 400 (a body that
// cannot be read), a LOG Endpoint's 204, a 502 for a status an agent must
// not report, a 503 with no agent since the last one left, a 503 for an
// agent that left mid-forward, a 503 for the body budget, a retry answered
// by the local process, and a 503 for a relay that shut down mid-forward.
func TestExplainTheRelaysOwnAnswers(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--forward-timeout", "20s", "--max-body", "64KiB", "--capture-cap", "64KiB",
		"--proxy-body-budget", "64KiB", "--shutdown-grace", "1s")
	acct := signUpTenant(t, r, "explain")

	t.Run("inspector", func(t *testing.T) {
		insp, _ := createInspector(t, r)
		if resp := send(t, r, insp, "POST", "/ok", nil, []byte("hi")); resp.Status != 204 {
			t.Fatalf("inspector answered %d", resp.Status)
		}
		d := inspectorDeliveryAt(t, r, insp, "/ok")
		explained(t, r, "", d.ID, 204, []string{"Answered 204 by the relay at ", "a guest inspector records every request and answers 204."},
			[]string{"Received POST at guest inspector " + insp + ", 2 bytes of body."})

		c := dialFrom(t, r, "")
		fmt.Fprintf(c, "POST /chunks HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", r.AddressHost(insp))
		if got := readUntilClosed(t, c, bufio.NewReader(c)); !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) {
			t.Fatalf("a malformed chunked body answered %q, want 400", got)
		}
		d = inspectorDeliveryAt(t, r, insp, "/chunks")
		explained(t, r, "", d.ID, 400, []string{"Answered 400 by the relay", "the request body could not be read (", "it was not forwarded"},
			[]string{`recorded reason: "request body unreadable: `})
	})

	t.Run("LOG Endpoint", func(t *testing.T) {
		ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "log", "mode": "LOG"})
		if resp := send(t, r, ep.ID, "PUT", "/log", nil, nil); resp.Status != 204 {
			t.Fatalf("LOG Endpoint answered %d", resp.Status)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, "/log")
		explained(t, r, acct.Token, d.ID, 204, []string{"Answered 204 by the relay", "LOG mode"}, nil)
	})

	t.Run("agent reports a status no sender can get, then leaves", func(t *testing.T) {
		ep := proxyEndpoint(t, r, acct.Token, "127.0.0.1:9", false)
		agent := r.Subscribe(t, acct.Token, forwardRequestsSubscription, map[string]any{"e": ep.ID})
		waitAgent(t, r, acct.Token, ep.ID, true)
		answered := make(chan harness.Response, 1)
		go func() {
			resp, _ := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: "/odd", Host: r.AddressHost(ep.ID)})
			answered <- resp
		}()
		var work struct{ ForwardRequests struct{ AttemptID string } }
		if err := json.Unmarshal(agent.Next(t, 15*time.Second), &work); err != nil || work.ForwardRequests.AttemptID == "" {
			t.Fatalf("forward request %+v: %v", work, err)
		}
		var done struct{ CompleteForward bool }
		r.MustGraphQL(t, acct.Token, `mutation($a: ID!){ completeForward(input: {attemptId: $a, status: 42}) }`,
			map[string]any{"a": work.ForwardRequests.AttemptID}, &done)
		if resp := <-answered; resp.Status != 502 {
			t.Fatalf("an agent's status 42 answered %d, want 502", resp.Status)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, "/odd")
		explained(t, r, acct.Token, d.ID, 502, []string{"Answered 502 by the relay", "reported status 42", "no sender can be given"},
			[]string{"agent reported invalid status 42"})

		// The agent's socket closes: its session ends, and a request
		// after it names that session. The relay counts the session until
		// its end is in the log, and a request that finds no agent while
		// the end is being appended is answered after it: its 503 comes
		// after the end in the log.
		agent.Close()
		waitAgent(t, r, acct.Token, ep.ID, false)
		if resp := send(t, r, ep.ID, "POST", "/gone", nil, nil); resp.Status != 503 {
			t.Fatalf("no agent: answered %d", resp.Status)
		}
		d = deliveryAt(t, r, acct.Token, ep.ID, "/gone")
		explained(t, r, acct.Token, d.ID, 503, []string{"Answered 503 by the relay", "no agent was connected to the Endpoint; its last agent session on node ",
			"(agent disconnected)"}, []string{"ended: agent disconnected."})
	})

	// A local handler that holds every request until released.
	release := make(chan struct{})
	arrived := make(chan string, 8)
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		arrived <- req.URL.Path
		select {
		case <-release:
		case <-req.Context().Done():
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(func() { close(release) }) // before the local server's Close
	ep := proxyEndpoint(t, r, acct.Token, target, false)
	sendAsync := func(path string, body []byte) <-chan harness.Response {
		out := make(chan harness.Response, 1)
		go func() {
			resp, _ := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: path, Host: r.AddressHost(ep.ID), Body: body})
			out <- resp
		}()
		return out
	}
	waitArrived := func(t *testing.T, path string) {
		t.Helper()
		select {
		case got := <-arrived:
			if got != path {
				t.Fatalf("the local handler got %s, want %s", got, path)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never reached the local handler", path)
		}
	}

	var cut string // the delivery an agent left mid-forward
	t.Run("agent killed mid-forward", func(t *testing.T) {
		agent := startAgentFor(t, r, acct.Token, ep.ID, target)
		answered := sendAsync("/cut", nil)
		waitArrived(t, "/cut")
		agent.Kill()
		if resp := <-answered; resp.Status != 503 {
			t.Fatalf("agent killed mid-forward: answered %d, want 503", resp.Status)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, "/cut")
		cut = d.ID
		// The forward fails as the session is dropped, before its end is
		// appended; the explanation tells of the end once the log holds it.
		waitSessionsEnded(t, r, acct.Token, ep.ID)
		explained(t, r, acct.Token, d.ID, 503, []string{"Answered 503 by the relay", "the agent on node ", "that had taken the forward (attempt 1) disconnected before the local answer came"},
			[]string{"ended: agent disconnected."})
		waitAgent(t, r, acct.Token, ep.ID, false)
	})

	// An agent for the rest of the test (one started in a subtest stops
	// with it).
	startAgentFor(t, r, acct.Token, ep.ID, target)

	t.Run("body budget", func(t *testing.T) {
		held := sendAsync("/held", bytes.Repeat([]byte("a"), 40<<10))
		waitArrived(t, "/held")
		// While the local process holds it, the delivery waits.
		var waiting proxied
		harness.Eventually(t, 10*time.Second, "/held in the history with its attempt", func() bool {
			for _, d := range endpointHistory(t, r, acct.Token, ep.ID) {
				if d.Path == "/held" && len(d.Attempts) == 1 {
					waiting = d
					return true
				}
			}
			return false
		})
		explained(t, r, acct.Token, waiting.ID, 0, []string{"No answer yet: attempt 1, requested at ", "is waiting for the local answer"},
			[]string{"Forward requested (attempt 1); the sender waited on node ", "; no outcome yet."})
		// The first body holds 40 of the 64 KiB budget until its answer.
		if resp := send(t, r, ep.ID, "POST", "/busy", nil, bytes.Repeat([]byte("b"), 40<<10)); resp.Status != 503 {
			t.Fatalf("a body over the budget answered %d, want 503", resp.Status)
		}
		d := deliveryAt(t, r, acct.Token, ep.ID, "/busy")
		explained(t, r, acct.Token, d.ID, 503, []string{"Answered 503 by the relay", "relay busy", "--proxy-body-budget"}, nil)
		release <- struct{}{}
		if resp := <-held; resp.Status != 200 {
			t.Fatalf("the held request answered %d", resp.Status)
		}
	})

	t.Run("a retry answered by the local process", func(t *testing.T) {
		if cut == "" {
			t.Skip("no delivery to retry: the agent killed mid-forward failed")
		}
		retried := make(chan string, 1)
		go func() {
			out, code := harness.RunWith(t, newCLIHome(t).command(""), "retry", cut, "--server", r.BareURL(), "--token", acct.Token)
			retried <- strconv.Itoa(code) + " " + out
		}()
		waitArrived(t, "/cut")
		release <- struct{}{}
		if got := <-retried; !strings.HasPrefix(got, "0 ") {
			t.Fatalf("relay retry: %s", got)
		}
		// The sender got attempt 1's 503; the 200 shown is the retry's,
		// which it never saw.
		explained(t, r, acct.Token, cut, 200, []string{"The sender was answered 503 by the relay at ",
			"Shown now: 200, from attempt 2, a retry, which the sender never saw: answered 200 by your local process at ", "(attempt 2, a retry, via the agent on node "},
			[]string{"Attempt 1 failed with 503", "agent disconnected", "Your local process answered 200"})
	})

	t.Run("relay shut down mid-forward", func(t *testing.T) {
		waitAgent(t, r, acct.Token, ep.ID, true)
		answered := sendAsync("/shutdown", nil)
		waitArrived(t, "/shutdown")
		// SIGTERM: the relay waits --shutdown-grace for the request, then
		// ends the attempt as it stops.
		r.Stop(t)
		<-answered
		r.Restart(t)
		d := deliveryAt(t, r, acct.Token, ep.ID, "/shutdown")
		explained(t, r, acct.Token, d.ID, 503, []string{"Answered 503 by the relay", "the relay shut down while attempt 1 waited for the local answer"},
			[]string{"failed with 503", "relay shutting down"})
	})
}
