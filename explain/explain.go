package explain

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Sessions reads the agent sessions an explanation names (the views).
type Sessions interface {
	// AgentSessions returns the sessions among ids, by agent ID.
	AgentSessions(ctx context.Context, ids []string) (map[string]readmodel.AgentSession, error)
	// LastAgentSession returns the Endpoint's session that started last at
	// or before at; false when none had.
	LastAgentSession(ctx context.Context, endpointID string, at time.Time) (readmodel.AgentSession, bool, error)
}

// Fact is one dated line of evidence from the log.
type Fact struct {
	At   time.Time
	Text string
}

// Explanation is why a delivery's sender got Status (the delivery's
// responseStatus; nil while no answer is recorded): Summary says it in one
// sentence, Facts are the dated evidence, oldest first.
type Explanation struct {
	Status  *int
	Summary string
	Facts   []Fact
}

// Text is the explanation as lines: the summary, then each fact after its
// time.
func (e Explanation) Text() string {
	var b strings.Builder
	b.WriteString(e.Summary)
	for _, f := range e.Facts {
		b.WriteString("\n" + FormatTime(f.At) + "  " + f.Text)
	}
	return b.String()
}

// FormatTime writes a time of the log as explanations show it: UTC, to the
// millisecond.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// maxAttemptFacts bounds the attempts an explanation tells of: the first
// (what the sender got when it was there) and the latest ones. A delivery
// retried without end would otherwise make its explanation, and the
// sessions it reads, grow with it.
const maxAttemptFacts = 10

// Delivery explains d. It reads the agent sessions its attempts name, and
// for a 503 "no agent connected" the Endpoint's session that started last
// before it.
func Delivery(ctx context.Context, d readmodel.Delivery, sessions Sessions) (Explanation, error) {
	x := explainer{d: d, decisive: -1}
	x.shown = shownAttempts(len(d.Attempts))
	for i, a := range d.Attempts {
		if a.Status != nil && !a.Late && !a.Copy {
			x.decisive = i // the latest attempt with an outcome the sender was not answered before
		}
	}
	if err := x.readSessions(ctx, sessions); err != nil {
		return Explanation{}, fmt.Errorf("explain delivery %s: %w", d.ID, err)
	}
	return Explanation{Status: d.ResponseStatus, Summary: x.summary(), Facts: x.facts()}, nil
}

// explainer holds what one explanation is made of.
type explainer struct {
	d        readmodel.Delivery
	decisive int   // index of the attempt that decided the status, -1 when none did
	shown    []int // indexes of the attempts told of, in order
	sessions map[string]readmodel.AgentSession
	// last is the Endpoint's session that started last before a decisive
	// 503 "no agent connected"; lastFound is false when none had.
	last      readmodel.AgentSession
	lastFound bool
}

// shownAttempts picks the attempts told of among n: all of them, or the
// first and the latest when there are more than maxAttemptFacts.
func shownAttempts(n int) []int {
	out := make([]int, 0, min(n, maxAttemptFacts))
	for i := range n {
		if n <= maxAttemptFacts || i == 0 || i >= n-(maxAttemptFacts-1) {
			out = append(out, i)
		}
	}
	return out
}

func (x *explainer) readSessions(ctx context.Context, sessions Sessions) error {
	var ids []string
	seen := map[string]bool{}
	for _, i := range x.shown {
		if id := x.d.Attempts[i].AgentID; id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	var err error
	if x.sessions, err = sessions.AgentSessions(ctx, ids); err != nil {
		return err
	}
	if x.decisive >= 0 && x.d.Attempts[x.decisive].Error == domain.FailureNoAgent && x.d.Kind == domain.AddressEndpoint {
		a := x.d.Attempts[x.decisive]
		x.last, x.lastFound, err = sessions.LastAgentSession(ctx, x.d.Address, outcomeTime(a))
		if err != nil {
			return err
		}
	}
	return nil
}

// outcomeTime is when an attempt's outcome was recorded, or its start in
// views that do not know.
func outcomeTime(a readmodel.Attempt) time.Time {
	if a.OutcomeAt.IsZero() {
		return a.StartedAt
	}
	return a.OutcomeAt
}

func (x *explainer) summary() string {
	if x.decisive >= 0 {
		return x.attemptSummary(x.decisive)
	}
	if r := x.d.RelayAnswer; r != nil {
		return x.relaySummary(*r)
	}
	for i := len(x.d.Attempts) - 1; i >= 0; i-- {
		if a := x.d.Attempts[i]; a.Status == nil {
			return fmt.Sprintf("No answer yet: attempt %d, requested at %s, is waiting for the local answer.", i+1, FormatTime(a.StartedAt))
		}
	}
	return fmt.Sprintf("No answer is recorded yet for this request, received at %s.", FormatTime(x.d.ReceivedAt))
}

// relaySummary explains an answer the relay gave itself.
func (x *explainer) relaySummary(r readmodel.RelayAnswer) string {
	head := fmt.Sprintf("Answered %d by the relay at %s", r.Status, FormatTime(r.At))
	switch {
	case r.Reason == "" && r.Status == 204 && x.d.Kind == domain.AddressInspector:
		return head + ": a guest inspector records every request and answers 204."
	case r.Reason == "" && r.Status == 204:
		return head + ": the Endpoint was in LOG mode, which records a request and answers 204 without forwarding it."
	case r.Reason == "":
		return head + "."
	case r.Reason == domain.ReasonConfiguredAnswer:
		return head + ": the address's configured answer (its answer setting); the request was recorded, not forwarded."
	case strings.HasPrefix(r.Reason, domain.ReasonHandshake):
		return fmt.Sprintf("%s: %s, a provider's verification request this address answers itself (its handshakes setting): answered by the relay, recorded, not forwarded.",
			head, strings.TrimPrefix(r.Reason, domain.ReasonHandshake))
	case r.Reason == domain.ReasonWrongProtocol:
		return head + ": the request came over plain HTTP to an address served over https only; it was recorded, not forwarded."
	case r.Reason == domain.ReasonBodyBudget:
		return head + " (relay busy): the request bodies it was already forwarding held its whole --proxy-body-budget, " +
			"so this one was not forwarded; the sender was told to retry after a second (Retry-After)."
	case strings.HasPrefix(r.Reason, domain.ReasonBodyTooLarge):
		return fmt.Sprintf("%s: the body was larger than the relay's --max-body of %s (it read %d bytes before it stopped); it was not forwarded.",
			head, strings.TrimPrefix(r.Reason, domain.ReasonBodyTooLarge), x.d.BodySize)
	case strings.HasPrefix(r.Reason, domain.ReasonBodyStalled):
		return fmt.Sprintf("%s: the request body stopped arriving for longer than --body-timeout (%d bytes arrived and are stored); it was not forwarded.",
			head, x.d.BodySize)
	case strings.HasPrefix(r.Reason, domain.ReasonBodyUnreadable):
		return fmt.Sprintf("%s: the request body could not be read (%s); it was not forwarded.",
			head, strings.TrimPrefix(r.Reason, domain.ReasonBodyUnreadable))
	case strings.HasPrefix(r.Reason, domain.ReasonFiltered):
		return fmt.Sprintf("%s: filtered, not forwarded: %s. It was recorded and answered as a LOG Endpoint answers.",
			head, strings.TrimPrefix(r.Reason, domain.ReasonFiltered))
	case strings.HasPrefix(r.Reason, domain.ReasonNoOutcome):
		text := head + ": no outcome of the forward reached it within --forward-timeout and 5 s more"
		if i := x.lastBefore(r.At); i >= 0 {
			text += fmt.Sprintf(" (attempt %d, requested at %s)", i+1, FormatTime(x.d.Attempts[i].StartedAt))
		}
		return text + "."
	default:
		return head + ": " + r.Reason + "."
	}
}

// lastBefore is the index of the latest attempt requested at or before t,
// -1 when none was.
func (x *explainer) lastBefore(t time.Time) int {
	last := -1
	for i, a := range x.d.Attempts {
		if !a.StartedAt.After(t) {
			last = i
		}
	}
	return last
}

// attemptSummary explains a status an attempt decided.
func (x *explainer) attemptSummary(i int) string {
	a := x.d.Attempts[i]
	status := *a.Status
	at := FormatTime(outcomeTime(a))
	which := x.attemptName(i)
	if a.Error == "" {
		text := fmt.Sprintf("Answered %d by your local process at %s (%s", status, at, x.carried(i))
		if a.DurationMs != nil {
			text += fmt.Sprintf(", %d ms", *a.DurationMs)
		}
		return text + ")."
	}
	head := fmt.Sprintf("Answered %d by the relay at %s", status, at)
	switch e := a.Error; {
	case e == domain.FailureNoAgent:
		return head + ": " + x.noAgent(i)
	case e == domain.FailureAgentDisconnected:
		return fmt.Sprintf("%s: the agent%s that had taken the forward (%s) disconnected before the local answer came.",
			head, x.onNode(a), which)
	case e == domain.FailureShuttingDown:
		return fmt.Sprintf("%s: the relay shut down while %s waited for the local answer.", head, which)
	case strings.HasPrefix(e, domain.FailureTimeout):
		return fmt.Sprintf("%s: the local target did not answer within %s (--forward-timeout) of the forward requested at %s (%s).",
			head, strings.TrimPrefix(e, domain.FailureTimeout), FormatTime(a.StartedAt), x.carried(i))
	case e == domain.FailureRestarted:
		return fmt.Sprintf("Recorded %d by the relay at %s: the relay stopped while %s waited for the local answer, "+
			"so the sender got no answer from it; the relay closed the attempt when it started again.", status, at, which)
	case e == domain.FailureNodeLostBeforeAnswer:
		return fmt.Sprintf("Recorded %d by the relay at %s: relay node %s, which the sender was connected to, was lost while %s waited "+
			"for the local answer, so the sender got no answer from it; another node closed the attempt.", status, at, orUnknown(a.Node), which)
	case strings.HasPrefix(e, domain.FailureNodeLost):
		return fmt.Sprintf("%s: relay node %s, which held the agent's session, stopped answering (its lease lapsed) before the local answer to %s.",
			head, nodeOf(e, domain.FailureNodeLost), which)
	case strings.HasPrefix(e, domain.FailureNodeUnreachable):
		return fmt.Sprintf("%s: %s could not be sent to relay node %s, which held the Endpoint's agent session.",
			head, which, nodeOf(e, domain.FailureNodeUnreachable))
	case strings.HasPrefix(e, domain.FailureInvalidStatus):
		return fmt.Sprintf("%s: the agent%s reported status %s for %s, which no sender can be given.",
			head, x.onNode(a), strings.TrimPrefix(e, domain.FailureInvalidStatus), which)
	default:
		return fmt.Sprintf("%s: the agent%s got no answer from your local process (%s): %s.", head, x.onNode(a), which, e)
	}
}

// noAgent tells of the Endpoint's last agent session before a 503 "no
// agent connected".
func (x *explainer) noAgent(i int) string {
	lead := "no agent was connected to the Endpoint"
	if i > 0 {
		lead += fmt.Sprintf(" (%s)", x.attemptName(i))
	}
	if !x.lastFound {
		return lead + ", and no agent had ever connected to it."
	}
	s := x.last
	node := ""
	if s.Node != "" {
		node = " on node " + s.Node
	}
	if s.DisconnectedAt.IsZero() || s.DisconnectedAt.After(outcomeTime(x.d.Attempts[i])) {
		return fmt.Sprintf("%s; the log shows its last agent session%s, started at %s, as not yet ended then.",
			lead, node, FormatTime(s.ConnectedAt))
	}
	return fmt.Sprintf("%s; its last agent session%s started at %s and ended at %s (%s).",
		lead, node, FormatTime(s.ConnectedAt), FormatTime(s.DisconnectedAt), orUnknown(s.Reason))
}

// attemptName names attempt i: "attempt 2, a retry".
func (x *explainer) attemptName(i int) string {
	if a := x.d.Attempts[i]; a.Copy {
		return fmt.Sprintf("attempt %d, a copy for agent %s", i+1, a.AgentID)
	}
	if x.d.Attempts[i].Retry {
		return fmt.Sprintf("attempt %d, a retry", i+1)
	}
	return fmt.Sprintf("attempt %d", i+1)
}

// carried names attempt i and the agent that carried it: "attempt 2, a
// retry, via the agent on node n1".
func (x *explainer) carried(i int) string {
	a := x.d.Attempts[i]
	name := x.attemptName(i)
	if a.AgentID == "" {
		return name
	}
	if a.Retry {
		name += ","
	}
	return name + " via the agent" + x.onNode(a)
}

// onNode names the node of the agent session that served a, when known.
func (x *explainer) onNode(a readmodel.Attempt) string {
	if s, ok := x.sessions[a.AgentID]; ok && s.Node != "" {
		return " on node " + s.Node
	}
	return ""
}

// nodeOf reads the node out of a failure such as "relay node lost (n2)".
func nodeOf(failure, prefix string) string {
	rest := strings.TrimSpace(strings.TrimPrefix(failure, prefix))
	return orUnknown(strings.TrimSuffix(strings.TrimPrefix(rest, "("), ")"))
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// facts lists the evidence, oldest first.
func (x *explainer) facts() []Fact {
	d := x.d
	kind := "Endpoint"
	if d.Kind == domain.AddressInspector {
		kind = "guest inspector"
	}
	out := []Fact{{At: d.ReceivedAt, Text: fmt.Sprintf("Received %s at %s %s, %d bytes of body.", d.Method, kind, d.Address, d.BodySize)}}
	if r := d.RelayAnswer; r != nil {
		text := fmt.Sprintf("The relay answered %d itself", r.Status)
		if r.Reason != "" {
			text += " (recorded reason: " + strconv.Quote(r.Reason) + ")"
		}
		out = append(out, Fact{At: r.At, Text: text + "."})
	}
	prev := -1
	for _, i := range x.shown {
		if i > prev+1 {
			out = append(out, Fact{At: d.Attempts[i].StartedAt, Text: fmt.Sprintf("(%d attempts in between are not told of here; see the attempts.)", i-prev-1)})
		}
		prev = i
		out = append(out, x.attemptFacts(i)...)
	}
	if x.decisive >= 0 && d.Attempts[x.decisive].Error == domain.FailureNoAgent && d.Kind == domain.AddressEndpoint {
		if x.lastFound {
			out = append(out, sessionFacts(x.last, "the last to start before attempt "+strconv.Itoa(x.decisive+1), time.Time{})...)
		} else {
			out = append(out, Fact{At: d.Attempts[x.decisive].StartedAt, Text: "No agent session of Endpoint " + d.Address + " had started by then."})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// attemptFacts are an attempt's request, its outcome and, for the attempt
// that decided the status, the agent session that served it.
func (x *explainer) attemptFacts(i int) []Fact {
	a := x.d.Attempts[i]
	name := x.attemptName(i)
	req := "Forward requested (" + name + ")"
	if a.Node != "" {
		req += "; the sender waited on node " + a.Node
	}
	if a.Status == nil {
		return []Fact{{At: a.StartedAt, Text: req + "; no outcome yet."}}
	}
	out := []Fact{{At: a.StartedAt, Text: req + "."}}
	took := ""
	if d := a.DurationMs; d != nil {
		took = fmt.Sprintf(" after %d ms", *d)
	}
	var text string
	if a.Error == "" {
		text = fmt.Sprintf("Your local process answered %d%s (%s)", *a.Status, took, name)
		if a.AgentID != "" {
			text += ", reported by agent " + a.AgentID + x.onNode(a)
		}
	} else {
		text = fmt.Sprintf("%s failed with %d%s: %s", capitalize(name), *a.Status, took, a.Error)
		if a.AgentID != "" {
			text += " (agent " + a.AgentID + x.onNode(a) + ")"
		}
	}
	if a.Late {
		text += "; late: the relay had already answered the sender itself"
	}
	if f := a.Fidelity; f != nil && len(f.Differences) > 0 {
		text += "; the agent reports that the " + fidelityParts(f.Differences) + " it handed your local process differed from what the relay sent"
	}
	out = append(out, Fact{At: outcomeTime(a), Text: text + "."})
	if s, ok := x.sessions[a.AgentID]; ok && i == x.decisive {
		until := outcomeTime(a)
		if a.Error == domain.FailureAgentDisconnected {
			until = time.Time{} // its end is why; it may be recorded just after the failure
		}
		out = append(out, sessionFacts(s, "it served "+name, until)...)
	}
	return out
}

// sessionFacts tell of an agent session: its start and, when it ended and
// not after until (zero: whenever), its end.
func sessionFacts(s readmodel.AgentSession, role string, until time.Time) []Fact {
	start := "Agent session " + s.AgentID + " connected"
	if s.Node != "" {
		start += " on node " + s.Node
	}
	if s.Target != "" {
		start += ", forwarding to " + s.Target
	}
	out := []Fact{{At: s.ConnectedAt, Text: start + " (" + role + ")."}}
	if !s.DisconnectedAt.IsZero() && (until.IsZero() || !s.DisconnectedAt.After(until)) {
		out = append(out, Fact{At: s.DisconnectedAt, Text: "Agent session " + s.AgentID + " ended: " + orUnknown(s.Reason) + "."})
	}
	return out
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// fidelityParts names the differing parts of a fidelity receipt in words.
func fidelityParts(parts []string) string {
	words := make([]string, len(parts))
	for i, p := range parts {
		words[i] = strings.ReplaceAll(p, "_", " ")
	}
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
