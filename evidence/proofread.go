package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ProvedEvents are a Proof's events; decoding refuses more than
// MaxProofEvents before decoding any.
type ProvedEvents []ProvedEvent

// UnmarshalJSON implements json.Unmarshaler.
func (es *ProvedEvents) UnmarshalJSON(b []byte) error {
	if err := checkArray(b, "the proof's events", MaxProofEvents); err != nil {
		return err
	}
	return json.Unmarshal(b, (*[]ProvedEvent)(es))
}

// StreamProofEvents are a StreamProof's events (the stream's chain);
// decoding refuses more than MaxProofEvents before decoding any.
type StreamProofEvents []StreamProofEvent

// UnmarshalJSON implements json.Unmarshaler.
func (es *StreamProofEvents) UnmarshalJSON(b []byte) error {
	if err := checkArray(b, "the proof's events", MaxProofEvents); err != nil {
		return err
	}
	return json.Unmarshal(b, (*[]StreamProofEvent)(es))
}

// AuditPath is an audit path, hex, from the leaf up; decoding refuses
// more than MaxPath hashes before decoding any.
type AuditPath []string

// UnmarshalJSON implements json.Unmarshaler.
func (p *AuditPath) UnmarshalJSON(b []byte) error {
	if err := checkArray(b, "an audit path", MaxPath); err != nil {
		return err
	}
	return json.Unmarshal(b, (*[]string)(p))
}

// ReadProof reads a proof file that relay events prove wrote: a Proof, or
// a StreamProof when its format says so (the other is nil). A file over
// MaxProofBytes is refused before it is read (a *LimitError), and so is
// one with more events or a longer path than a proof holds.
func ReadProof(path string) (*Proof, *StreamProof, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return decodeProof(f, path, size)
}

// decodeProof reads a proof of size bytes (-1: unknown) from r; name names
// it in errors. It holds at most MaxProofBytes+1 bytes of r.
func decodeProof(r io.Reader, name string, size int64) (*Proof, *StreamProof, error) {
	tooLarge := &LimitError{File: name, What: "a proof", Limit: MaxProofBytes}
	if size > MaxProofBytes {
		return nil, nil, tooLarge
	}
	b, err := readAtMost(r, MaxProofBytes, size)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > MaxProofBytes {
		return nil, nil, tooLarge
	}
	var format struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(b, &format); err != nil {
		return nil, nil, notAProof(name, err)
	}
	if format.Format == StreamProofFormat {
		var p StreamProof
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, nil, notAProof(name, err)
		}
		return nil, &p, nil
	}
	var p Proof
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, nil, notAProof(name, err)
	}
	return &p, nil, nil
}

// readAtMost reads r to its end or to limit+1 bytes, into one allocation
// of size+1 bytes when size (-1: unknown) is right, else doubling up to
// limit+1.
func readAtMost(r io.Reader, limit int, size int64) ([]byte, error) {
	b := make([]byte, 0, min(max(size, 512)+1, int64(limit)+1))
	for {
		if len(b) == cap(b) {
			if len(b) > limit {
				return b, nil
			}
			grown := make([]byte, len(b), min(2*cap(b), limit+1))
			copy(grown, b)
			b = grown
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// notAProof is a proof file that does not decode; an array over its bound
// is a LimitError.
func notAProof(name string, err error) error {
	var ce *countError
	if errors.As(err, &ce) {
		return &LimitError{File: name, What: ce.what, Limit: int64(ce.max), Count: true}
	}
	return fmt.Errorf("%s: not a proof: %w", name, err)
}
