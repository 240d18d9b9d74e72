package agentcli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/termtext"
)

// TextObserver prints the agent's events as lines of text: the connection
// state on Status, one line per forward on Out (time, Endpoint when there
// are several, method, path, status, duration, delivery id). Forward lines
// that follow one another within lineDelay are written together, so a busy
// agent does not spend a write per forward; a status line is written after
// every forward line before it.
type TextObserver struct {
	Out, Status  io.Writer
	Color        bool // ANSI colours, for a terminal
	PrintHeaders bool // the request headers under each line
	PrintBody    bool // the request body under each line

	mu     sync.Mutex
	names  map[string]string // Endpoint ID → name, with several Endpoints
	queues map[string]bool   // the IDs of QUEUE Endpoints, whose senders the relay answers

	// Forward lines that follow one another closely are written together:
	// one write (a syscall on a terminal or pipe) per lineDelay instead of
	// one per forward. A line after a quiet spell is written at once.
	pending   []byte    // lines not yet written to Out
	lastWrite time.Time // when lines were last written to Out
	scheduled bool      // a flush of pending is due

	line  []byte   // the buffer Forwarded builds a line in, kept for the next
	stamp [32]byte // room for a time or a status before they are painted
}

// lineDelay is the longest a forward line waits to be written with the
// next ones: too short to see, long enough to gather the lines of a busy
// agent into one write.
const lineDelay = 25 * time.Millisecond

// maxPending bounds the bytes of lines waiting for lineDelay; more are
// written at once.
const maxPending = 64 << 10

// emit writes a forward line to Out, or keeps it for the flush due within
// lineDelay when lines were written less than lineDelay ago. o.mu is held.
func (o *TextObserver) emit(line []byte) {
	now := time.Now()
	if !o.scheduled && now.Sub(o.lastWrite) >= lineDelay {
		_, _ = o.Out.Write(line) // the terminal: a failed write has nowhere to be told
		o.lastWrite = now
		return
	}
	o.pending = append(o.pending, line...)
	if len(o.pending) >= maxPending {
		o.flushLocked()
		return
	}
	if !o.scheduled {
		o.scheduled = true
		time.AfterFunc(lineDelay-now.Sub(o.lastWrite), o.flushDue)
	}
}

// flushDue writes the lines kept by emit.
func (o *TextObserver) flushDue() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.scheduled = false
	o.flushLocked()
}

// flushLocked writes the lines kept by emit, before anything else is
// written (a status line comes after the forward lines before it). o.mu
// is held.
func (o *TextObserver) flushLocked() {
	if len(o.pending) == 0 {
		return
	}
	_, _ = o.Out.Write(o.pending) // the terminal: a failed write has nowhere to be told
	o.pending = o.pending[:0]
	o.lastWrite = time.Now()
}

// ANSI colours.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

func (o *TextObserver) paint(code, s string) string {
	if !o.Color {
		return s
	}
	return code + s + ansiReset
}

// State prints connection changes.
func (o *TextObserver) State(e StateEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked() // every forward line before the agent stops or reconnects
	switch e.State {
	case Connected:
		o.names, o.queues = nil, map[string]bool{}
		if len(e.Endpoints) > 1 {
			o.names = map[string]string{}
			for _, ep := range e.Endpoints {
				o.names[ep.ID] = ep.Name
			}
			fmt.Fprintf(o.Status, "connected to %s, forwarding %d endpoints over one connection\n", e.Server, len(e.Endpoints))
		} else {
			fmt.Fprintf(o.Status, "connected to %s, forwarding to %s\n", e.Server, e.Endpoints[0].Target)
		}
		for _, ep := range e.Endpoints {
			// The name is what relay tail, retry and the console take.
			label := fmt.Sprintf("endpoint %s (%s): ", ep.Name, ep.ID)
			fmt.Fprintf(o.Status, "%spublic URL %s → %s\n", label, o.paint(ansiBold, ep.URL), ep.Target)
			if ep.Mode == "QUEUE" {
				o.queues[ep.ID] = true
				fmt.Fprintf(o.Status, "endpoint %s is in QUEUE mode: the relay answers senders at once and sends its queue here, oldest first, with a Relay-Delivery-Id header\n", ep.ID)
			} else if ep.Mode != "PROXY" {
				fmt.Fprintf(o.Status, "endpoint %s is in %s mode: its deliveries are recorded and answered by the relay, not forwarded; set its mode to PROXY to forward them\n", ep.ID, ep.Mode)
			}
			if ep.OtherAgents > 0 {
				fmt.Fprintf(o.Status, "note: %s endpoint %s; one of them answers the senders and the others receive copies (right after a reconnect the count may include this agent's previous connection)\n", domain.Counted(ep.OtherAgents, "other listener already serves", "other listeners already serve"), ep.ID)
			}
		}
	case Reconnecting:
		if e.HeldOff {
			fmt.Fprintf(o.Status, "not connected: the relay refused this listener for now: %s; trying again in %s\n", e.Reason, time.Until(e.NextTry).Round(100*time.Millisecond))
			break
		}
		fmt.Fprintf(o.Status, "disconnected: %s; reconnecting in %s\n", e.Reason, time.Until(e.NextTry).Round(100*time.Millisecond))
	case Stopped:
		fmt.Fprintln(o.Status, "agent stopped")
	}
}

// Role prints whether this agent answers an Endpoint's senders or
// receives copies, and when that changes.
func (o *TextObserver) Role(e RoleEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushLocked()
	what := "receives copies: another listener's answers go to the senders"
	if e.Primary {
		what = "primary: this agent's answers go to the senders"
	}
	if o.queues[e.EndpointID] {
		// The relay answered the senders already (202); the primary's
		// answer decides whether a queued delivery is delivered.
		what = "receives copies: another listener's answers decide the queue's attempts"
		if e.Primary {
			what = "primary: this agent's answers decide the queue's attempts (the relay answered the senders)"
		}
	}
	lead := "endpoint"
	if e.Changed && e.Primary {
		lead = "now primary on endpoint"
	} else if e.Changed {
		lead = "no longer primary on endpoint"
	}
	fmt.Fprintf(o.Status, "%s %s (%s): %s (%s)\n", lead, e.Name, e.EndpointID, what, domain.Counted(e.Listeners, "listener", "listeners"))
}

// Forwarded prints one line per forward, and the request's headers and
// body when asked.
func (o *TextObserver) Forwarded(e ForwardEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.ReportOnly { // the forward's own line went out already
		o.reportLocked(e)
		return
	}
	// Appended piece by piece to a buffer kept between lines, not with fmt:
	// this runs for every forward.
	b := o.line[:0]
	b = o.appendPainted(b, ansiDim, e.Time.AppendFormat(o.stamp[:0], "15:04:05"))
	b = append(b, ' ')
	if name, ok := o.names[e.EndpointID]; ok {
		b = append(append(append(b, '['), name...), "] "...)
	}
	b = append(b, e.Method...)
	b = append(b, ' ')
	b = append(b, termtext.Safe(e.Path, false)...)
	b = append(b, " → "...)
	b = o.appendPainted(b, statusColour(e.Status, e.Error), strconv.AppendInt(o.stamp[:0], int64(e.Status), 10))
	if e.Error != "" {
		b = append(append(b, ' '), e.Error...)
	} else {
		b = append(b, " ("...)
		b = strconv.AppendInt(b, e.Duration.Milliseconds(), 10)
		b = append(b, " ms)"...)
	}
	if e.Copy {
		b = append(b, "  copy: not sent to the sender"...)
	}
	if e.DeliveryID != "" {
		b = append(append(b, "  delivery "...), e.DeliveryID...)
	}
	if e.Signature != "" {
		b = append(append(b, "  signature "...), e.Signature...)
	}
	b = append(b, '\n')
	if o.PrintHeaders {
		for _, h := range e.RequestHeaders {
			b = fmt.Appendf(b, "    %s: %s\n", termtext.Safe(h.Name, false), termtext.Safe(h.Value, false))
		}
	}
	if o.PrintBody && len(e.RequestBody) > 0 {
		if utf8.Valid(e.RequestBody) {
			b = fmt.Appendf(b, "    %s\n", strings.ReplaceAll(termtext.Safe(string(e.RequestBody), true), "\n", "\n    "))
		} else {
			b = fmt.Appendf(b, "    (%d bytes, not UTF-8)\n", len(e.RequestBody))
		}
	}
	o.emit(b)
	if cap(b) <= maxLine {
		o.line = b
	}
	if e.ReportError != "" {
		o.reportLocked(e)
	}
}

// reportLocked prints e's ReportLine on Status.
func (o *TextObserver) reportLocked(e ForwardEvent) {
	o.flushLocked()
	fmt.Fprintln(o.Status, e.ReportLine())
}

// ReportLine is the line that tells why e's answer was not reported to
// the relay: method, path, the reason. The path is the sender's, so it is
// made safe for a terminal as the forward's own line is.
func (e ForwardEvent) ReportLine() string {
	return termtext.Safe(e.Method, false) + " " + termtext.Safe(e.Path, false) + ": " + termtext.Safe(e.ReportError, false)
}

// maxLine bounds the buffer Forwarded keeps for the next line: a line with
// a large body printed is built in one of its own.
const maxLine = 4 << 10

// appendPainted appends s to b, in colour code when o.Color.
func (o *TextObserver) appendPainted(b []byte, code string, s []byte) []byte {
	if !o.Color {
		return append(b, s...)
	}
	return append(append(append(b, code...), s...), ansiReset...)
}

func statusColour(status int, errText string) string {
	switch {
	case errText != "" || status >= 500:
		return ansiRed
	case status >= 300:
		return ansiYellow
	}
	return ansiGreen
}
