// Package deliveryjson holds deliveries as the relay's API answers them
// to the command line: the JSON shapes and GraphQL field lists the
// commands read, and the delivery an export writes (HAR, replay bundle)
// with the writer interface both formats implement.
package deliveryjson

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/relayhq/relay/internal/termtext"
)

// Header is a header with its exact bytes when they are not UTF-8.
type Header struct {
	Name        string  `json:"name"`
	Value       string  `json:"value"`
	ValueBase64 *string `json:"valueBase64"`
}

// Attempt is one try to reach the local target.
type Attempt struct {
	ID         string  `json:"id"`
	Status     *int    `json:"status"`
	StartedAt  string  `json:"startedAt"`
	DurationMs *int    `json:"durationMs"`
	Error      *string `json:"error"`
	Retry      bool    `json:"retry"`
	Late       bool    `json:"late"` // answered after the relay answered the sender itself
	// Edit is what an edited retry changed before sending; null when sent
	// as recorded.
	Edit *Edit `json:"edit"`
	// Signature is the verdict of the agent's provider signature check
	// (relay listen --verify); null when none was made.
	Signature *string `json:"signature"`
	// Role is PRIMARY (what the sender got, or would have) or COPY (a copy
	// given to another listener, AgentID).
	Role    string  `json:"role"`
	AgentID *string `json:"agentId"`
	// Fidelity compares the agent's receipt of what it handed the local
	// process with what the relay sent (docs/evidence.md).
	Fidelity Fidelity `json:"fidelity"`
	// Queued: sent by a QUEUE Endpoint's queue, not a user's retry;
	// PossibleDuplicate: sent again after an earlier attempt was left open,
	// so the local process may have had the delivery already.
	Queued            bool `json:"queued"`
	PossibleDuplicate bool `json:"possibleDuplicate"`
}

// Fidelity is an attempt's fidelity: IDENTICAL, DIFFERENT (naming
// the parts: REQUEST_LINE, HEADERS, BODY) or NOT_REPORTED.
type Fidelity struct {
	Status      string   `json:"status"`
	Differences []string `json:"differences"`
}

// String is the fidelity as `deliveries show` prints it.
func (f Fidelity) String() string {
	switch f.Status {
	case "IDENTICAL":
		return "identical"
	case "DIFFERENT":
		parts := make([]string, len(f.Differences))
		for i, p := range f.Differences {
			parts[i] = strings.ToLower(strings.ReplaceAll(p, "_", " "))
		}
		return "different: " + strings.Join(parts, ", ")
	case "NOT_REPORTED", "":
		return "not reported"
	}
	return termtext.Safe(f.Status, false)
}

// Edit is an attempt's edit as the API answers it.
type Edit struct {
	Method       *string  `json:"method"`
	Path         *string  `json:"path"`
	SetHeaders   []Header `json:"setHeaders"`
	UnsetHeaders []string `json:"unsetHeaders"`
	Body         *string  `json:"body"`
	BodyBase64   *string  `json:"bodyBase64"`
}

// AttemptFields is what the client commands read of an attempt.
const AttemptFields = `id status startedAt durationMs error retry late signature fidelity{ status differences } role agentId queued possibleDuplicate edit{ method path setHeaders{ name value valueBase64 } unsetHeaders body bodyBase64 }`

// ExactText is text, or the bytes of raw when the API sent them.
func ExactText(text string, raw *string) string {
	if raw == nil {
		return text
	}
	if b, err := base64.StdEncoding.DecodeString(*raw); err == nil {
		return string(b)
	}
	return text
}

// Export is a delivery as exports read it: the request with its
// exact bytes, what the sender was answered, and the attempts.
type Export struct {
	ID                 string    `json:"id"`
	Address            string    `json:"address"`
	Method             string    `json:"method"`
	Path               string    `json:"path"`
	PathBase64         *string   `json:"pathBase64"`
	HTTPVersion        string    `json:"httpVersion"`
	Headers            []Header  `json:"headers"`
	DroppedHeaders     int       `json:"droppedHeaders"`
	BodyBase64         string    `json:"bodyBase64"`
	BodySize           int       `json:"bodySize"`
	Complete           bool      `json:"complete"`
	BodyUnread         bool      `json:"bodyUnread"`
	ReceivedAt         string    `json:"receivedAt"`
	ResponseStatus     *int      `json:"responseStatus"`
	ResponseHeaders    []Header  `json:"responseHeaders"`
	ResponseBodyBase64 *string   `json:"responseBodyBase64"`
	Attempts           []Attempt `json:"attempts"`
}

const ExportFields = `id address method path pathBase64 httpVersion headers{ name value valueBase64 } droppedHeaders bodyBase64 bodySize complete bodyUnread receivedAt responseStatus responseHeaders{ name value valueBase64 } responseBodyBase64 attempts{ id status startedAt durationMs error retry late }`

// Body is the stored body's bytes.
func (d Export) Body() []byte {
	b, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
	return b
}

// Target is the raw request target's exact bytes.
func (d Export) Target() string { return ExactText(d.Path, d.PathBase64) }

// IncompleteText says what of the request is not stored, or "".
func (d Export) IncompleteText() string {
	var parts []string
	if !d.Complete {
		parts = append(parts, "body "+StoredText(len(d.Body()), d.BodySize, d.BodyUnread))
	}
	if d.DroppedHeaders > 0 {
		parts = append(parts, fmt.Sprintf("%d header values over the relay's header limits not stored", d.DroppedHeaders))
	}
	return strings.Join(parts, "; ")
}

// Writer writes one export format, entry by entry.
type Writer interface {
	Begin(meta Meta) error
	Entry(d Export) error
	End() error
}

// Meta describes an export as a whole.
type Meta struct {
	Address    string
	URL        string // the address's public URL
	ExportedAt time.Time
	Filter     string // the filters given, for the reader
	Version    string // the program's, as relay --version prints it
}

// StoredText says how much of an incomplete body is stored, and why.
func StoredText(stored, size int, unread bool) string {
	sizes := fmt.Sprintf("stored %s of %s (incomplete", humanize.IBytes(uint64(stored)), humanize.IBytes(uint64(size)))
	if unread {
		return sizes + ": refused over the relay's --max-body, read no further)"
	}
	return sizes + ")"
}
