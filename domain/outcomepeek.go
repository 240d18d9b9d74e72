package domain

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// Reading what a delivery's attempts got back reads their answers from
// the log, and a captured answer holds up to the agent's 10 MiB in base64:
// decoding it through encoding/json only to learn its status and headers,
// or to compare its size, cost a core 90 ms an 8 MB answer. An answer
// puts its fields in a fixed order (delivery_id, attempt_id, status,
// headers, body, body_size, then the rest), as encoding/json and
// appendResponded write them; inside a JSON string every quote is escaped,
// so a key's text cannot occur in a value.

var (
	bodyKey     = []byte(`,"body":"`)
	bodySizeKey = []byte(`,"body_size":`)
)

// DecodeRespondedHead decodes a ForwardResponded's stored data but its
// body, which it skips unread: the result's Body is nil, its BodySize and
// Captured as stored (data without body_size, which every answer the
// relay writes has, is decoded whole, Body included). body64 is the body
// as the data holds it, in base64 (a slice of data; nil when none is
// stored): DecodeBody64 decodes it, faster than encoding/json, which
// scans it byte by byte first.
func DecodeRespondedHead(data []byte) (e ForwardResponded, body64 []byte, err error) {
	// The body, when stored, comes right before body_size, which every
	// answer has; what follows (the fidelity's digests) has keys named
	// body too.
	i := -1
	if end := bytes.Index(data, bodySizeKey); end >= 0 {
		i = bytes.Index(data[:end], bodyKey)
	}
	if i < 0 { // no body stored (or null): nothing to skip
		err = json.Unmarshal(data, &e)
		return e, nil, wrapHead(err)
	}
	start := i + len(bodyKey)
	end := bytes.IndexByte(data[start:], '"')
	if end < 0 {
		return e, nil, fmt.Errorf("decode %s: the body has no end", TypeForwardResponded)
	}
	// The data without `,"body":"…"`, in a new slice: data is not changed.
	head := append(data[:i:i], data[start+end+1:]...)
	if err := json.Unmarshal(head, &e); err != nil {
		return e, nil, wrapHead(err)
	}
	return e, data[start : start+end : start+end], nil
}

// Body64Len is the length of the body body64 holds in base64.
func Body64Len(body64 []byte) int {
	n := base64.StdEncoding.DecodedLen(len(body64))
	for i := len(body64) - 1; i >= 0 && i >= len(body64)-2 && body64[i] == '='; i-- {
		n--
	}
	return n
}

// DecodeBody64 decodes a body DecodeRespondedHead left in base64.
func DecodeBody64(body64 []byte) ([]byte, error) {
	out := make([]byte, base64.StdEncoding.DecodedLen(len(body64)))
	n, err := base64.StdEncoding.Decode(out, body64)
	if err != nil {
		return nil, fmt.Errorf("decode %s: body: %w", TypeForwardResponded, err)
	}
	return out[:n], nil
}

func wrapHead(err error) error {
	if err != nil {
		return fmt.Errorf("decode %s: %w", TypeForwardResponded, err)
	}
	return nil
}
