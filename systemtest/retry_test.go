package systemtest

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

const retryMutation = `mutation($id: ID!){ retryDelivery(id: $id){ ` + proxiedFields + ` } }`

// TestRetryAfterLocalFix: a delivery the local handler refused is replayed
// once the handler is fixed, through the API and through `relay retry`.
func TestRetryAfterLocalFix(t *testing.T) {
	t.Parallel()
	var fixed atomic.Bool
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fixed.Load() {
			http.Error(w, "no such hook yet", http.StatusNotFound)
			return
		}
		fmt.Fprint(w, "handled "+r.RequestURI)
	}), true)

	if resp := p.send(t, "POST", "/hooks/new?x=1", [][2]string{{"X-Event", "created"}}, []byte(`{"id":7}`)); resp.Status != 404 {
		t.Fatalf("before the fix: sender got %d %q, want 404", resp.Status, resp.Body)
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/hooks/new?x=1")
	fixed.Store(true)

	var out struct{ RetryDelivery proxied }
	p.r.MustGraphQL(t, p.acct.Token, retryMutation, map[string]any{"id": d.ID}, &out)
	got := out.RetryDelivery
	if !slices.Equal(attemptStatuses(got), []int{404, 200}) {
		t.Fatalf("attempts %v, want [404 200]", attemptStatuses(got))
	}
	if got.ResponseStatus == nil || *got.ResponseStatus != 200 {
		t.Errorf("responseStatus %s, want 200", intp(got.ResponseStatus))
	}
	if got.Attempts[1].StartedAt.Before(got.Attempts[0].StartedAt) {
		t.Errorf("attempts out of time order: %v then %v", got.Attempts[0].StartedAt, got.Attempts[1].StartedAt)
	}
	if got.Attempts[0].Retry || !got.Attempts[1].Retry {
		t.Errorf("retry flags %v, %v; want false, true", got.Attempts[0].Retry, got.Attempts[1].Retry)
	}
	if got.ResponseBody == nil || *got.ResponseBody != "handled /hooks/new?x=1" {
		t.Errorf("responseBody %s, want the retry's answer", strp(got.ResponseBody))
	}
	if again := deliveryByID(t, p.r, p.acct.Token, d.ID); again == nil || !slices.Equal(attemptStatuses(*again), []int{404, 200}) {
		t.Errorf("delivery(id) does not show the retry: %+v", again)
	}

	out2, code := harness.RunCLI(t, "retry", d.ID, "--server", p.r.BareURL(), "--token", p.acct.Token)
	if code != 0 {
		t.Fatalf("relay retry exited %d:\n%s", code, out2)
	}
	for _, want := range []string{"attempt 1: 404", "attempt 2: 200", "attempt 3: 200"} {
		if !strings.Contains(out2, want) {
			t.Errorf("relay retry output lacks %q:\n%s", want, out2)
		}
	}
	if d := deliveryByID(t, p.r, p.acct.Token, d.ID); d == nil || !slices.Equal(attemptStatuses(*d), []int{404, 200, 200}) {
		t.Errorf("after relay retry: %+v", d)
	}

	out3, code := harness.RunCLI(t, "retry", unknownDelivery(), "--server", p.r.BareURL(), "--token", p.acct.Token)
	if code == 0 || !strings.Contains(out3, "NOT_FOUND") {
		t.Errorf("relay retry of an unknown id exited %d:\n%s", code, out3)
	}
}

// TestRetryRefusals produces every refusal code of retryDelivery.
func TestRetryRefusals(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "a")
	b := signUpTenant(t, r, "b")
	target := localTarget(t, echoPath)

	logEP := createEndpointFor(t, r, a.Token, map[string]any{"name": "log", "mode": "LOG"})
	send(t, r, logEP.ID, "POST", "/logged", nil, []byte("{}"))
	logged := deliveryAt(t, r, a.Token, logEP.ID, "/logged")

	inspectorID, _ := createInspector(t, r)
	send(t, r, inspectorID, "POST", "/inspected", nil, []byte("{}"))
	var insp []delivery
	harness.Eventually(t, 10*time.Second, "the inspector's row", func() bool {
		insp = history(t, r, inspectorID, 10)
		return len(insp) == 1
	})

	proxyEP := proxyEndpoint(t, r, a.Token, target, false)
	agent := startAgentFor(t, r, a.Token, proxyEP.ID, target)
	if resp := send(t, r, proxyEP.ID, "POST", "/big", nil, randomBytes(300<<10)); resp.Status != 200 {
		t.Fatalf("300 KiB forward: %d %q", resp.Status, resp.Body)
	}
	big := deliveryAt(t, r, a.Token, proxyEP.ID, "/big")
	if big.Complete {
		t.Fatalf("a 300 KiB body is stored complete")
	}
	send(t, r, proxyEP.ID, "POST", "/small", nil, []byte("{}"))
	small := deliveryAt(t, r, a.Token, proxyEP.ID, "/small")

	cases := []struct {
		name, token, id, code string
	}{
		{"LOG Endpoint", a.Token, logged.ID, "RETRY_NOT_PROXY"},
		{"inspector delivery", a.Token, insp[0].ID, "RETRY_NOT_PROXY"},
		{"incomplete payload", a.Token, big.ID, "PAYLOAD_INCOMPLETE"},
		{"unknown id", a.Token, unknownDelivery(), "NOT_FOUND"},
		{"another account's delivery", b.Token, small.ID, "NOT_FOUND"},
		{"no token", "", small.ID, "UNAUTHENTICATED"},
		{"bad token", "rly_notatoken", small.ID, "UNAUTHENTICATED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := refusal(t, r, c.token, retryMutation, map[string]any{"id": c.id}); got.Code() != c.code {
				t.Errorf("code %q (%s), want %s", got.Code(), got.Message, c.code)
			}
		})
	}
	// None of the refusals added an attempt.
	if d := deliveryByID(t, r, a.Token, small.ID); d == nil || len(d.Attempts) != 1 {
		t.Errorf("refused retries changed the delivery: %+v", d)
	}

	agent.Stop(t)
	waitAgent(t, r, a.Token, proxyEP.ID, false)
	if got := refusal(t, r, a.Token, retryMutation, map[string]any{"id": small.ID}); got.Code() != "AGENT_NOT_CONNECTED" {
		t.Errorf("agent stopped: code %q (%s), want AGENT_NOT_CONNECTED", got.Code(), got.Message)
	}
}
