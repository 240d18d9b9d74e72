package explain

import (
	"context"
	"fmt"
	"slices"
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

// Explanation is why a delivery shows Status (the delivery's
// responseStatus; nil while no answer is recorded) and what its sender
// was answered, which is not always the same: a retry's outcome is shown
// but never reached the sender. Sender and Shown say both apart; Summary
// says them in words (one line), Facts are the dated evidence, oldest
// first.
type Explanation struct {
	Status *int
	// Sender is what the sender's connection received; nil while it waits,
	// or when it never got an answer (SenderLost).
	Sender *SenderAnswer
	// SenderLost: the relay stopped, or its node was lost, while the sender
	// waited; the sender's connection closed without an answer.
	SenderLost bool
	// Shown is where the status shown (Status) comes from; nil when
	// Status is.
	Shown   *Shown
	Summary string
	Facts   []Fact
}

// SenderAnswer is the answer a sender's connection received.
type SenderAnswer struct {
	Status int
	// Attempt is the number (from 1) of the attempt whose outcome was
	// sent, 0 when the relay answered by itself (at receipt, or a 504
	// when no outcome came in time).
	Attempt int
	At      time.Time
}

// ShownKind is what gave the status a delivery shows.
type ShownKind string

// The sources of a shown status. Copies are never one: a copy's outcome
// is recorded beside the delivery's, not as it.
const (
	ShownRelay       ShownKind = "RELAY"        // the relay's own answer to the sender
	ShownForward     ShownKind = "FORWARD"      // the outcome of the sender's own forward
	ShownRetry       ShownKind = "RETRY"        // a retry, sent as recorded
	ShownEditedRetry ShownKind = "EDITED_RETRY" // a retry with an edited request
)

// Shown is where a delivery's shown status comes from.
type Shown struct {
	Status  int
	Attempt int // from 1; 0 for the relay's own answer
	Kind    ShownKind
}

// SameAsSender reports whether the status shown is the sender's answer.
func (x Explanation) SameAsSender() bool {
	return x.Sender != nil && x.Shown != nil && x.Sender.Attempt == x.Shown.Attempt
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
	x := explainer{d: d, decisive: -1, original: -1, last: map[int]readmodel.AgentSession{}, toldSession: map[string]bool{}}
	x.shown = shownAttempts(len(d.Attempts))
	for i, a := range d.Attempts {
		if a.Status != nil && !a.Late && !a.Copy {
			x.decisive = i // the latest attempt with an outcome the sender was not answered before
		}
		if x.original < 0 && !a.Retry && !a.Copy {
			x.original = i // the forward the sender waited for
		}
	}
	if err := x.readSessions(ctx, sessions); err != nil {
		return Explanation{}, fmt.Errorf("explain delivery %s: %w", d.ID, err)
	}
	out := Explanation{Status: d.ResponseStatus, Shown: x.shownStatus(), Summary: x.summary(), Facts: x.facts()}
	out.Sender, out.SenderLost = x.senderAnswer()
	return out, nil
}

// explainer holds what one explanation is made of.
type explainer struct {
	d        readmodel.Delivery
	decisive int   // index of the attempt that decided the status shown, -1 when none did
	original int   // index of the forward the sender waited for, -1 when none was made
	shown    []int // indexes of the attempts told of, in order
	sessions map[string]readmodel.AgentSession
	// toldSession names the sessions the facts already tell of.
	toldSession map[string]bool
	// last holds, by attempt index, the Endpoint's session that started
	// last before a 503 "no agent connected" of the decisive attempt or
	// the sender's; an index without one had no session before it.
	last map[int]readmodel.AgentSession
}

// senderAnswer is what the sender's connection received: the relay's own
// answer when it gave one (at receipt, or a 504 when no outcome came in
// time), else the outcome of the forward it waited for. A retry or a copy
// never answers a sender. lost is true when the sender's connection
// closed without an answer (the relay stopped or its node was lost).
func (x *explainer) senderAnswer() (a *SenderAnswer, lost bool) {
	if r := x.d.RelayAnswer; r != nil {
		return &SenderAnswer{Status: r.Status, At: r.At}, false
	}
	if x.original < 0 {
		return nil, false
	}
	o := x.d.Attempts[x.original]
	switch {
	case o.Status == nil:
		return nil, false
	case x.senderLost():
		return nil, true
	}
	return &SenderAnswer{Status: *o.Status, Attempt: x.original + 1, At: outcomeTime(o)}, false
}

// senderLost tells an original forward whose sender got no answer.
func (x *explainer) senderLost() bool {
	if x.original < 0 || x.d.RelayAnswer != nil {
		return false
	}
	e := x.d.Attempts[x.original].Error
	return e == domain.FailureRestarted || e == domain.FailureNodeLostBeforeAnswer
}

// shownStatus is where the delivery's responseStatus comes from: the
// latest attempt with an outcome that is neither a copy nor late, else the
// relay's own answer (the rule of the history view).
func (x *explainer) shownStatus() *Shown {
	if i := x.decisive; i >= 0 {
		a := x.d.Attempts[i]
		kind := ShownForward
		switch {
		case a.Retry && a.Edit != nil:
			kind = ShownEditedRetry
		case a.Retry:
			kind = ShownRetry
		}
		return &Shown{Status: *a.Status, Attempt: i + 1, Kind: kind}
	}
	if r := x.d.RelayAnswer; r != nil {
		return &Shown{Status: r.Status, Kind: ShownRelay}
	}
	return nil
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
	for _, i := range x.noAgentAttempts() {
		s, found, err := sessions.LastAgentSession(ctx, x.d.Address, outcomeTime(x.d.Attempts[i]))
		if err != nil {
			return err
		}
		if found {
			x.last[i] = s
		}
	}
	return nil
}

// noAgentAttempts are the attempts whose 503 "no agent connected" the
// summary tells of: the decisive one's and the sender's (at most two).
func (x *explainer) noAgentAttempts() []int {
	if x.d.Kind != domain.AddressEndpoint {
		return nil
	}
	var out []int
	for _, i := range []int{x.decisive, x.senderAttempt()} {
		if i >= 0 && !slices.Contains(out, i) && x.d.Attempts[i].Error == domain.FailureNoAgent {
			out = append(out, i)
		}
	}
	return out
}

// senderAttempt is the index of the attempt whose outcome the sender got,
// -1 when none did (the relay answered itself, or nothing came yet).
func (x *explainer) senderAttempt() int {
	if x.d.RelayAnswer != nil || x.original < 0 || x.d.Attempts[x.original].Status == nil || x.senderLost() {
		return -1
	}
	return x.original
}

// outcomeTime is when an attempt's outcome was recorded, or its start in
// views that do not know.
func outcomeTime(a readmodel.Attempt) time.Time {
	if a.OutcomeAt.IsZero() {
		return a.StartedAt
	}
	return a.OutcomeAt
}

// summary says what the sender got and, when the status shown came from
// a later attempt the sender never saw, that too, apart.
func (x *explainer) summary() string {
	sender := x.senderSummary()
	if x.decisive < 0 || x.decisive == x.senderAttempt() || (x.decisive == x.original && x.senderLost()) {
		return sender
	}
	if x.d.RelayAnswer != nil || x.senderAttempt() >= 0 {
		sender = "The sender was " + lowerFirst(sender)
	}
	i := x.decisive
	return fmt.Sprintf("%s Shown now: %d, from %s, which the sender never saw: %s",
		sender, *x.d.Attempts[i].Status, x.attemptName(i), lowerFirst(x.attemptSummary(i)))
}

// senderSummary explains what the sender got, or that it waits.
func (x *explainer) senderSummary() string {
	if r := x.d.RelayAnswer; r != nil {
		return x.relaySummary(*r)
	}
	if i := x.original; i >= 0 {
		a := x.d.Attempts[i]
		if a.Status != nil {
			return x.attemptSummary(i)
		}
		return fmt.Sprintf("No answer yet: %s, requested at %s, is waiting for the local answer.", x.attemptName(i), FormatTime(a.StartedAt))
	}
	return fmt.Sprintf("No answer is recorded yet for this request, received at %s.", FormatTime(x.d.ReceivedAt))
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// relaySummary explains an answer the relay gave itself, and the
// handshake it looked like when the address does not answer that one.
func (x *explainer) relaySummary(r readmodel.RelayAnswer) string {
	base, h := domain.UnansweredHandshake(r.Reason)
	r.Reason = base
	text := x.relayAnswer(r)
	if h != "" {
		text += " " + Hint(x.d)
	}
	return text
}

// relayAnswer explains an answer the relay gave itself for its reason.
func (x *explainer) relayAnswer(r readmodel.RelayAnswer) string {
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
		return head + " (relay busy): the request bodies it was already forwarding or recording held its --proxy-body-budget " +
			"(or the share of it the sender, its network or the account may hold), so this one's body was not read, nor forwarded; " +
			"the sender was told to retry after a second (Retry-After)."
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
			a := x.d.Attempts[i]
			text += fmt.Sprintf(" (attempt %d, requested at %s)", i+1, FormatTime(a.StartedAt))
			if a.Late && a.Status != nil {
				text += fmt.Sprintf("; its outcome, %d, came at %s, too late to be sent", *a.Status, FormatTime(outcomeTime(a)))
			}
		}
		return text + "."
	case strings.HasPrefix(r.Reason, domain.ReasonOutcomeNotRecorded):
		text := head + " (store unavailable): the forward ran"
		i := x.lastBefore(r.At)
		if i >= 0 {
			text += fmt.Sprintf(" (attempt %d, requested at %s)", i+1, FormatTime(x.d.Attempts[i].StartedAt))
		}
		text += fmt.Sprintf(", but the log did not take its outcome (%s), so the sender was told to retry rather than given an answer the log does not hold",
			strings.TrimPrefix(r.Reason, domain.ReasonOutcomeNotRecorded))
		if i >= 0 && x.d.Attempts[i].Status != nil {
			text += fmt.Sprintf("; the outcome, %d, reached the log after all", *x.d.Attempts[i].Status)
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
	case strings.HasPrefix(e, domain.FailureNodeBodyBudget):
		return fmt.Sprintf("%s (relay busy): relay node %s, which held the agent's session, was already holding the requests of its whole --proxy-body-budget, or the account's share of it, so %s was not given to the agent.",
			head, nodeOf(e, domain.FailureNodeBodyBudget), which)
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
	s, found := x.last[i]
	if !found {
		return lead + ", and no agent had ever connected to it."
	}
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

// attemptName names attempt i: "attempt 2, a retry", "attempt 3, from the
// queue". A QUEUE Endpoint's attempts are recorded as retries too; the
// queue sent them, not a user. Why one is a possible duplicate is told
// once, in its request's fact (attemptFacts).
func (x *explainer) attemptName(i int) string {
	if a := x.d.Attempts[i]; a.Copy {
		return fmt.Sprintf("attempt %d, a copy for agent %s", i+1, a.AgentID)
	}
	if a := x.d.Attempts[i]; a.Queued && a.PossibleDuplicate {
		return fmt.Sprintf("attempt %d, from the queue, a possible duplicate", i+1)
	}
	if x.d.Attempts[i].Queued {
		return fmt.Sprintf("attempt %d, from the queue", i+1)
	}
	if a := x.d.Attempts[i]; a.Retry && a.Edit != nil {
		return fmt.Sprintf("attempt %d, an edited retry", i+1)
	}
	if x.d.Attempts[i].Retry {
		return fmt.Sprintf("attempt %d, a retry", i+1)
	}
	return fmt.Sprintf("attempt %d", i+1)
}

// leftOpen says which attempt before i was left open, and by what, so
// that attempt i was sent again not knowing whether the local process had
// seen the delivery: "attempt 3 was left open when the relay stopped".
func (x *explainer) leftOpen(i int) string {
	for j := i - 1; j >= 0; j-- {
		a := x.d.Attempts[j]
		if a.Copy {
			continue
		}
		by := ""
		switch {
		case a.Status == nil:
			by = " without an outcome"
		case a.Error == domain.FailureRestarted:
			by = " when the relay stopped"
		case a.Error == domain.FailureShuttingDown:
			by = " when the relay shut down"
		case a.Error == domain.FailureNodeLostBeforeAnswer:
			by = " when its relay node was lost"
		default:
			continue
		}
		return fmt.Sprintf("attempt %d was left open%s", j+1, by)
	}
	return "an earlier attempt was left open"
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
	told := map[string]bool{} // the two attempts may name one session
	for _, i := range x.noAgentAttempts() {
		if s, ok := x.last[i]; ok && !told[s.AgentID] {
			told[s.AgentID] = true
			out = append(out, sessionFacts(s, "the last to start before attempt "+strconv.Itoa(i+1), time.Time{})...)
		} else if !ok {
			out = append(out, Fact{At: d.Attempts[i].StartedAt, Text: "No agent session of Endpoint " + d.Address + " had started by then."})
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
	switch {
	case a.Node != "" && i == x.original:
		req += "; the sender waited on node " + a.Node
	case a.Node != "":
		req += " on node " + a.Node + "; no sender waited for it"
	case i != x.original:
		req += "; no sender waited for it"
	}
	if a.Queued && a.PossibleDuplicate {
		req += "; " + x.leftOpen(i) + ", so your local process may have had this delivery already"
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
	if s, ok := x.sessions[a.AgentID]; ok && (i == x.decisive || i == x.senderAttempt()) && !x.toldSession[s.AgentID] {
		x.toldSession[s.AgentID] = true // the sender's attempt and a retry may name one session
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

// handshakeNames are the handshakes as a hint names them.
var handshakeNames = map[domain.Handshake]string{
	domain.HandshakeSlack:   "a Slack URL verification",
	domain.HandshakeMeta:    "a Meta verification (hub.challenge)",
	domain.HandshakeGraph:   "a Microsoft Graph validation (validationToken)",
	domain.HandshakeDropbox: "a Dropbox verification (challenge)",
	domain.HandshakeZoom:    "a Zoom URL validation (endpoint.url_validation)",
}

// handshakeFlags are the flags a handshake needs besides --handshake.
var handshakeFlags = map[domain.Handshake]string{
	domain.HandshakeMeta: " --meta-verify-token-file FILE",
	domain.HandshakeZoom: " --zoom-secret-file FILE",
}

// Hint says what the relay noticed of a delivery and how to act on it, ""
// when nothing: today, a provider's verification request an inspector or
// LOG Endpoint received without answering it as a handshake, and the
// command that enables that handshake.
func Hint(d readmodel.Delivery) string {
	if d.RelayAnswer == nil {
		return ""
	}
	_, h := domain.UnansweredHandshake(d.RelayAnswer.Reason)
	name, ok := handshakeNames[h]
	if !ok {
		return ""
	}
	cmd := "relay endpoints update " + d.Address
	if d.Kind == domain.AddressInspector {
		cmd = "relay inspector answer " + d.Address
	}
	return fmt.Sprintf("This looks like %s, which this address does not answer; enable the %s handshake to answer it: %s --handshake %s%s (--handshake replaces the list: name the others it answers too).",
		name, providerTitle(h), cmd, h, handshakeFlags[h])
}

// providerTitle is a handshake's provider as people write it.
func providerTitle(h domain.Handshake) string {
	switch h {
	case domain.HandshakeGraph:
		return "Microsoft Graph"
	case domain.HandshakeSlack, domain.HandshakeMeta, domain.HandshakeDropbox, domain.HandshakeZoom:
		return strings.ToUpper(string(h[:1])) + string(h[1:])
	}
	return string(h)
}
