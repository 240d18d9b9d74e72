package evidence

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// ExportLine is what Verify reads of one line of `relay events export`:
// an event as stored with its link, or (Removed) the link of an event a
// stream deletion removed. Other fields of the line are ignored.
type ExportLine struct {
	Position uint64          `json:"position"`
	ID       string          `json:"id"`
	Stream   string          `json:"stream"`
	Revision uint64          `json:"revision"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
	Removed  bool            `json:"removed"`
	Leaf     string          `json:"leaf"`
	Link     string          `json:"link"`
	// A log with a chain per stream: Chain is "stream" on every line and
	// Append is the position of the first event of the append (one message) the event is part of.
	Chain  string `json:"chain"`
	Append uint64 `json:"append"`
}

// ExportFile is an export read as a Source: two readers over the same
// file, one for the chain and one for the events, each reading forward.
type ExportFile struct {
	chain, events *lineReader
}

// OpenExport opens an export file.
func OpenExport(path string) (*ExportFile, error) {
	a, err := newLineReader(path)
	if err != nil {
		return nil, err
	}
	b, err := newLineReader(path)
	if err != nil {
		a.close()
		return nil, err
	}
	return &ExportFile{chain: a, events: b}, nil
}

// Close closes the file.
func (x *ExportFile) Close() error {
	x.chain.close()
	x.events.close()
	return nil
}

// Chain implements Source; after is ignored (the readers only go forward).
func (x *ExportFile) Chain(_ context.Context, _ uint64, limit int) ([]ChainLink, error) {
	var out []ChainLink
	for len(out) < limit {
		l, ok, err := x.chain.next()
		if err != nil || !ok {
			return out, err
		}
		if l.Leaf == "" && l.Link == "" {
			continue // an export of a log without a chain
		}
		leaf, err := ParseHash(l.Leaf)
		if err != nil {
			return nil, fmt.Errorf("export line %d: leaf: %w", x.chain.n, err)
		}
		link, err := ParseHash(l.Link)
		if err != nil {
			return nil, fmt.Errorf("export line %d: link: %w", x.chain.n, err)
		}
		out = append(out, ChainLink{Position: l.Position, Stream: l.Stream, Leaf: leaf, Link: link})
	}
	return out, nil
}

// Events implements Source; after is ignored.
func (x *ExportFile) Events(_ context.Context, _ uint64, limit int) ([]Event, error) {
	var out []Event
	for len(out) < limit {
		l, ok, err := x.events.next()
		if err != nil || !ok {
			return out, err
		}
		if l.Removed {
			continue
		}
		out = append(out, Event{Position: l.Position, ID: l.ID, Stream: l.Stream, Revision: l.Revision, Type: l.Type,
			Data: l.Data, Metadata: l.Metadata})
	}
	return out, nil
}

type lineReader struct {
	f *os.File
	r *bufio.Reader
	n int
}

func newLineReader(path string) (*lineReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open export: %w", err)
	}
	return &lineReader{f: f, r: bufio.NewReaderSize(f, 1<<20)}, nil
}

func (l *lineReader) close() { _ = l.f.Close() }

// maxLine bounds one line: an event holds at most a body of the largest
// --max-body, in base64, plus its headers.
const maxLine = 256 << 20

func (l *lineReader) next() (ExportLine, bool, error) {
	var line []byte
	for {
		chunk, err := l.r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxLine {
			return ExportLine{}, false, fmt.Errorf("export line %d: longer than %d bytes", l.n+1, maxLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(line) == 0 {
			return ExportLine{}, false, nil
		}
		if err != nil && err != io.EOF {
			return ExportLine{}, false, fmt.Errorf("read export: %w", err)
		}
		break
	}
	l.n++
	var e ExportLine
	if err := json.Unmarshal(line, &e); err != nil {
		return ExportLine{}, false, fmt.Errorf("export line %d: %w", l.n, err)
	}
	return e, true, nil
}

// IsStreamExport reports whether an export is of a log with a chain per
// stream (its first line says "chain": "stream").
func IsStreamExport(path string) (bool, error) {
	r, err := newLineReader(path)
	if err != nil {
		return false, err
	}
	defer r.close()
	l, ok, err := r.next()
	return ok && l.Chain == "stream", err
}

// StreamExport is an export of a log with a chain per stream read as a
// MessageSource: consecutive lines of one append are one message, and removed
// lines (a deletion's record of a message it removed) belong to the message
// after them, the deletion's tombstone.
type StreamExport struct {
	path string
	r    *lineReader
	next *ExportLine // read ahead
	done bool        // the reader reached the end of the file
}

// OpenStreamExport opens an export file of a log with a chain per stream.
func OpenStreamExport(path string) (*StreamExport, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open export: %w", err)
	}
	return &StreamExport{path: path}, nil
}

// Close closes the file.
func (x *StreamExport) Close() error {
	if x.r != nil {
		x.r.close()
		x.r = nil
	}
	return nil
}

// Messages implements MessageSource: after 0 once the file was read to its
// end starts from its beginning again; otherwise it goes on where the last
// call ended (the file is read forward only).
func (x *StreamExport) Messages(_ context.Context, after uint64, limit int) ([]Message, error) {
	if x.r == nil || after == 0 && x.done {
		x.Close()
		r, err := newLineReader(x.path)
		if err != nil {
			return nil, err
		}
		x.r, x.next, x.done = r, nil, false
	}
	var out []Message
	for len(out) < limit {
		m, ok, err := x.message()
		if err != nil || !ok {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (x *StreamExport) line() (*ExportLine, error) {
	if x.next != nil {
		l := x.next
		x.next = nil
		return l, nil
	}
	l, ok, err := x.r.next()
	if err != nil || !ok {
		x.done = x.done || err == nil
		return nil, err
	}
	return &l, nil
}

// message reads the lines of the next message.
func (x *StreamExport) message() (Message, bool, error) {
	var m Message
	var seq uint64
	chained := false
	for {
		l, err := x.line()
		if err != nil {
			return Message{}, false, err
		}
		if l == nil {
			return m, len(m.Events) > 0 || len(m.Removed) > 0, nil
		}
		if l.Removed {
			if len(m.Events) > 0 {
				x.next = l
				return m, true, nil
			}
			link, err := ParseHash(l.Link)
			if err != nil {
				return Message{}, false, fmt.Errorf("export line %d: link: %w", x.r.n, err)
			}
			m.Removed = append(m.Removed, RemovedLink{Position: l.Position, Link: link})
			continue
		}
		if len(m.Events) > 0 && (l.Append != seq || l.Stream != m.Stream) {
			x.next = l
			return m, true, nil
		}
		seq, m.Stream = l.Append, l.Stream
		m.Events = append(m.Events, Event{Position: l.Position, ID: l.ID, Stream: l.Stream, Revision: l.Revision, Type: l.Type,
			Data: l.Data, Metadata: l.Metadata})
		if len(m.Events) == 1 {
			chained = l.Leaf != ""
		}
		if chained {
			leaf, err := ParseHash(l.Leaf)
			if err != nil {
				return Message{}, false, fmt.Errorf("export line %d: leaf: %w", x.r.n, err)
			}
			link, err := ParseHash(l.Link)
			if err != nil {
				return Message{}, false, fmt.Errorf("export line %d: link: %w", x.r.n, err)
			}
			m.Leaves, m.Links = append(m.Leaves, leaf), append(m.Links, link)
		}
	}
}
