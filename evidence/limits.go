package evidence

import (
	"errors"
	"fmt"
)

// What the verifier reads from a file someone handed an auditor (an
// export, a proof) is bounded near the largest the relay writes, so that a
// hostile file is refused before it costs more than a small multiple of
// these limits in memory. docs/security.md lists them with their figures.
const (
	// MaxEventBody is the most body bytes one event holds: a request's
	// stored body is at most --capture-cap, itself at most --max-body; a
	// captured response, or an edited retry's body, at most --max-body.
	// relay serve refuses a --max-body above it (default 10 MiB).
	MaxEventBody = 16 << 20
	// MaxEventText bounds the other bytes an event holds that come from
	// outside: a request's line and header fields (--max-header-bytes,
	// which relay serve keeps at or under it), its trailers (net/http reads
	// at most 4 KiB of them), a response's header fields (the recorder
	// keeps those that fit it, as ingress does for a request's).
	MaxEventText = 1 << 20
	// jsonEscape is JSON's worst expansion of one byte of text: the stored
	// form writes "<" as \u003c, a byte that is not UTF-8 as \ufffd.
	jsonEscape = 6
	// eventFields allows for what the relay itself sets in an event (ids,
	// names, times, digests, counts): a few hundred bytes in practice.
	eventFields = 64 << 10
	// MaxEventData is the largest stored data of one event: the body in
	// base64 (4 bytes per 3), the text escaped, the fields.
	// 16 MiB → 21.3 MiB; + 6 MiB; + 64 KiB: about 27.4 MiB.
	MaxEventData = (MaxEventBody+2)/3*4 + jsonEscape*MaxEventText + eventFields
	// MaxEventMetadata is the largest stored metadata (ids, a time, a
	// schema version: under 1 KiB in practice).
	MaxEventMetadata = 64 << 10
	// exportEnvelope is what an export line adds around the stored data
	// and metadata: position, id, stream, revision, type, times, leaf and
	// link in hex (under 1 KiB in practice).
	exportEnvelope = 64 << 10
	// MaxExportLine bounds one line of an export (about 27.5 MiB): relay
	// events export writes the event's data and metadata as stored.
	MaxExportLine = MaxEventData + MaxEventMetadata + exportEnvelope
	// maxMessageEvents and maxMessageBytes bound one append (one message)
	// of an export of a log with a chain per stream: the relay appends a
	// handful of events at once, of which at most one carries a body.
	maxMessageEvents = MaxProofEvents
	maxMessageBytes  = 2 * MaxExportLine
	// pageBytes bounds the data and metadata of one page of events read
	// from an export (a page ends early past it; one event may exceed it).
	pageBytes = MaxExportLine

	// MaxPath bounds an audit path: a tree of at most 2^64 leaves is 64
	// high.
	MaxPath = 64
	// MaxProofEvents is the most events relay events prove puts in one
	// proof (one delivery's events).
	MaxProofEvents = 1000
	// proofEventEnvelope is a proved event's fields besides its data and
	// metadata, indented as prove writes them: the audit path (64 hashes
	// of 64 hex digits, quoted, indented: 64 × 72 bytes), ids, leaf and
	// link, position and revision: under 6 KiB.
	proofEventEnvelope = 6 << 10
	// MaxProofBytes bounds a proof file (about 45 MiB): one event of the
	// largest size, its data and metadata in base64 (a proof carries the
	// stored bytes so that it survives reformatting), and up to
	// MaxProofEvents events with their paths (6 MiB), plus the checkpoint
	// and the envelope (under 2 MiB allowed). relay events prove refuses to
	// write a larger one, so every proof it writes is one verify reads.
	MaxProofBytes = (MaxEventData+MaxEventMetadata+2)/3*4 + MaxProofEvents*proofEventEnvelope + 2<<20
)

// LimitError is a file, or a part of it, over one of the limits above: the
// file is refused before it is read further, as it is not one the relay
// wrote.
type LimitError struct {
	File  string // the file's name
	Line  int    // its line, for an export; 0 for a whole file
	What  string // what is over the limit
	Limit int64
	Count bool // Limit counts entries, not bytes
}

func (e *LimitError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s line %d", e.File, e.Line)
	}
	limit := fmt.Sprintf("%d bytes (%s)", e.Limit, mib(e.Limit))
	if e.Count {
		limit = fmt.Sprintf("%d entries", e.Limit)
	}
	return fmt.Sprintf("%s: %s over the limit of %s: larger than anything the relay writes, so not read", where, e.What, limit)
}

// IsLimit reports whether err is a LimitError.
func IsLimit(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// countError is a JSON array with more elements than allowed.
type countError struct {
	what string
	max  int
}

func (e *countError) Error() string {
	return fmt.Sprintf("%s holds more than %d entries", e.what, e.max)
}

// checkArray counts the elements of the JSON array raw (as handed to an
// UnmarshalJSON) without decoding them, so that a hostile array is refused
// before anything is allocated for it. Other values (null) pass: the
// decoder that follows refuses what is not an array.
func checkArray(raw []byte, what string, max int) error {
	commas, depth, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 1:
			// n commas separate n+1 elements.
			if commas++; commas >= max {
				return &countError{what: what, max: max}
			}
		}
	}
	return nil
}
