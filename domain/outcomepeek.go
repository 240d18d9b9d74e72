package domain

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Reading what a delivery's attempts got back walks the events of its
// stream, and a captured answer holds up to the agent's 10 MiB in base64:
// decoding each whole to learn which attempt it answers, or to throw its
// body away, cost a core 90 ms an 8 MB answer. These read the fields
// before the body without decoding it. Both events put them first
// (delivery_id, attempt_id, then status and headers, then the body), as
// encoding/json and appendResponded write them; inside a JSON string every
// quote is escaped, so a key's text cannot occur in a value.

var (
	attemptKey = []byte(`"attempt_id":"`)
	bodyKey    = []byte(`,"body":"`)
)

// PeekAttemptID returns the attempt a ForwardResponded's or ForwardFailed's
// stored data is about, without decoding it; ok is false when it cannot
// tell (the caller decodes the event instead).
func PeekAttemptID(data []byte) (id string, ok bool) {
	i := bytes.Index(data, attemptKey)
	if i < 0 {
		return "", false
	}
	rest := data[i+len(attemptKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return "", false // an escaped ID: rare, decode it
	}
	return string(rest[:j]), true
}

// DecodeRespondedHead decodes a ForwardResponded's stored data but its
// body, which it skips unread: the result's Body is nil, its BodySize and
// Captured as stored. bodyLen is the length of the body the data holds.
func DecodeRespondedHead(data []byte) (e ForwardResponded, bodyLen int, err error) {
	i := bytes.Index(data, bodyKey)
	if i < 0 { // no body stored (or null): nothing to skip
		err = json.Unmarshal(data, &e)
		return e, 0, wrapHead(err)
	}
	start := i + len(bodyKey)
	end := bytes.IndexByte(data[start:], '"')
	if end < 0 {
		return e, 0, fmt.Errorf("decode %s: the body has no end", TypeForwardResponded)
	}
	bodyLen = base64.StdEncoding.DecodedLen(end)
	if end >= 2 && data[start+end-1] == '=' {
		bodyLen--
		if data[start+end-2] == '=' {
			bodyLen--
		}
	}
	// The data without `,"body":"…"`, in a new slice: data is not changed.
	head := append(data[:i:i], data[start+end+1:]...)
	if err := json.Unmarshal(head, &e); err != nil {
		return e, 0, wrapHead(err)
	}
	return e, bodyLen, nil
}

func wrapHead(err error) error {
	if err != nil {
		return fmt.Errorf("decode %s: %w", TypeForwardResponded, err)
	}
	return nil
}
