package systemtest

import (
	"regexp"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// heldOffLine is what `relay listen` and `relay agent` print when the
// relay refuses their session past the open sessions' cap.
var heldOffLine = regexp.MustCompile(`(?m)^not connected: the relay refused this listener for now: this Endpoint has 1 agent session open.*end one of its listeners.*\(TOO_MANY_SESSIONS; ` +
	"`relay endpoints show (\\S+)` lists the Endpoint's listeners\\); trying again in (\\S+)$")

// announced is what `relay listen` and `relay agent` print once connected.
var announced = regexp.MustCompile(`(?m)^connected to |public URL `)

// TestListenerPastTheSessionCap: on a relay that lets an Endpoint hold one
// agent session (--max-endpoint-sessions 1), a second `relay listen` and a
// `relay agent` on it say that the relay refused them for now, why, and
// what to do (end another listener, which `relay endpoints show` lists),
// and wait at least 5 s before trying again instead of 250–500 ms. Neither
// says it is connected, nor prints the public URL, before the refusal:
// each waits for the relay to list its session. Once the first listener
// ends, the second takes its place on a later try.
func TestListenerPastTheSessionCap(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--max-endpoint-sessions", "1")
	h, acct := loggedInHome(t, r)
	_, port := answeringTarget(t, 200, "ok")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "capped", "mode": "PROXY", "target": "localhost:" + port})
	a := h.startIn(t, t.TempDir(), "listen", port, "capped")
	waitOutput(t, a, regexp.MustCompile(`(?m)^endpoint capped \(`+ep.ID+`\): primary: this agent's answers go to the senders`))

	b := h.startIn(t, t.TempDir(), "listen", port, "capped")
	c := r.StartAgent(t, acct.Token, ep.ID, "localhost:"+port)
	for name, p := range map[string]*harness.Process{"relay listen": b, "relay agent": c} {
		m := waitOutput(t, p, heldOffLine)
		if m[1] != ep.ID {
			t.Errorf("%s names Endpoint %q, want %s", name, m[1], ep.ID)
		}
		if wait, err := time.ParseDuration(m[2]); err != nil || wait < 5*time.Second {
			t.Errorf("%s tries again in %s, want at least 5s:\n%s", name, m[2], p.Output())
		}
		if announced.MatchString(p.Output()) {
			t.Errorf("%s says it is connected to a relay that refused it:\n%s", name, p.Output())
		}
	}
	c.Stop(t)

	a.Stop(t)
	// b's next try is at most 10 s after its last refusal.
	harness.Eventually(t, 30*time.Second, "the second listener taking the place", func() bool {
		return regexp.MustCompile(`(?m)^endpoint capped \(` + ep.ID + `\): primary: this agent's answers go to the senders`).MatchString(b.Output())
	})
}
