package evidence

import (
	"bufio"
	"bytes"
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
		// The chain needs no data: chainLine leaves it undecoded.
		var l chainLine
		ok, err := x.chain.next(&l)
		if err != nil || !ok {
			return out, err
		}
		if l.Leaf == "" && l.Link == "" {
			continue // an export of a log without a chain
		}
		leaf, err := ParseHash(l.Leaf)
		if err != nil {
			return nil, fmt.Errorf("%s: leaf: %w", x.chain.where(), err)
		}
		link, err := ParseHash(l.Link)
		if err != nil {
			return nil, fmt.Errorf("%s: link: %w", x.chain.where(), err)
		}
		out = append(out, ChainLink{Position: l.Position, Stream: l.Stream, Leaf: leaf, Link: link})
	}
	return out, nil
}

// chainLine is what the chain reader decodes of a line.
type chainLine struct {
	Position uint64 `json:"position"`
	Stream   string `json:"stream"`
	Leaf     string `json:"leaf"`
	Link     string `json:"link"`
}

// Events implements Source; after is ignored. A page ends early once it
// holds pageBytes of data, so that a file of many large events is read a
// few at a time.
func (x *ExportFile) Events(_ context.Context, _ uint64, limit int) ([]Event, error) {
	var out []Event
	size := 0
	for len(out) < limit && size < pageBytes {
		var l ExportLine
		ok, err := x.events.next(&l)
		if err != nil || !ok {
			return out, err
		}
		if l.Removed {
			continue
		}
		size += len(l.Data) + len(l.Metadata)
		out = append(out, Event{Position: l.Position, ID: l.ID, Stream: l.Stream, Revision: l.Revision, Type: l.Type,
			Data: l.Data, Metadata: l.Metadata})
	}
	return out, nil
}

// lineReader reads an export line by line, each line at most max bytes:
// a longer one is refused once max bytes of it were read, never held
// whole (LimitError).
type lineReader struct {
	name string
	f    io.Closer
	r    *bufio.Reader
	max  int
	buf  []byte // the line being read; reused, at most max+1 bytes
	n    int    // lines read
}

func newLineReader(path string) (*lineReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open export: %w", err)
	}
	l := readLines(f, path, MaxExportLine)
	l.f = f
	return l, nil
}

// readLines reads lines of at most max bytes from r; name names it in
// errors.
func readLines(r io.Reader, name string, max int) *lineReader {
	return &lineReader{name: name, r: bufio.NewReaderSize(r, 64<<10), max: max}
}

func (l *lineReader) close() {
	if l.f != nil {
		_ = l.f.Close()
	}
}

// where names the line read last.
func (l *lineReader) where() string { return fmt.Sprintf("%s line %d", l.name, l.n) }

// next decodes the next line into dst; false at the end of the file.
func (l *lineReader) next(dst any) (bool, error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		// max bytes and the newline; checked before the chunk is kept.
		if len(l.buf)+len(chunk) > l.max+1 {
			return false, &LimitError{File: l.name, Line: l.n + 1, What: "an export line", Limit: int64(l.max)}
		}
		if need := len(l.buf) + len(chunk); need > cap(l.buf) {
			// Doubling up to 1 MiB, then the room of the longest line at
			// once: a fresh allocation's pages cost memory only once
			// written, and no half-filled copies pile up (append's quarter
			// steps would allocate five times the line).
			room := 2 * cap(l.buf)
			if need > 1<<20 {
				room = l.max + 1
			}
			grown := make([]byte, len(l.buf), min(max(room, need), l.max+1))
			copy(grown, l.buf)
			l.buf = grown
		}
		l.buf = append(l.buf, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(l.buf) == 0 {
			return false, nil
		}
		if err != nil && err != io.EOF {
			return false, fmt.Errorf("read %s: %w", l.name, err)
		}
		break
	}
	l.n++
	line := bytes.TrimSuffix(l.buf, []byte("\n"))
	if len(line) > l.max {
		return false, &LimitError{File: l.name, Line: l.n, What: "an export line", Limit: int64(l.max)}
	}
	if err := json.Unmarshal(line, dst); err != nil {
		return false, fmt.Errorf("%s: %w", l.where(), err)
	}
	return true, nil
}

// IsStreamExport reports whether an export is of a log with a chain per
// stream (its first line says "chain": "stream").
func IsStreamExport(path string) (bool, error) {
	r, err := newLineReader(path)
	if err != nil {
		return false, err
	}
	defer r.close()
	var l struct {
		Chain string `json:"chain"`
	}
	ok, err := r.next(&l)
	return ok && l.Chain == "stream", err
}

// StreamExport is an export of a log with a chain per stream read as a
// MessageSource: consecutive lines of one append are one message, and removed
// lines (a deletion's record of a message it removed) belong to the message
// after them, the deletion's tombstone.
type StreamExport struct {
	path  string
	r     *lineReader
	next  *ExportLine // read ahead
	done  bool        // the reader reached the end of the file
	ended bool        // the last call returned nothing: the end of a pass
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

// Messages implements MessageSource for a reader that reads the whole file
// in passes, each until a call returns nothing: a call goes on where the
// last one ended (the file is read forward only, after is ignored), and
// the call after the one that returned nothing starts from the beginning
// again. A page ends early once it holds pageBytes of data, so that a file
// of many large events is read a few at a time.
func (x *StreamExport) Messages(_ context.Context, _ uint64, limit int) ([]Message, error) {
	if x.r == nil || x.ended {
		x.Close()
		r, err := newLineReader(x.path)
		if err != nil {
			return nil, err
		}
		x.r, x.next, x.done, x.ended = r, nil, false, false
	}
	var out []Message
	size := 0
	for len(out) < limit && size < pageBytes {
		m, ok, err := x.message()
		if err != nil {
			return out, err
		}
		if !ok {
			x.ended = len(out) == 0
			return out, nil
		}
		for _, e := range m.Events {
			size += len(e.Data) + len(e.Metadata)
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
	var l ExportLine
	ok, err := x.r.next(&l)
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
	size := 0 // the data and metadata of m's events
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
				return Message{}, false, fmt.Errorf("%s: link: %w", x.r.where(), err)
			}
			m.Removed = append(m.Removed, RemovedLink{Position: l.Position, Link: link})
			continue
		}
		if len(m.Events) > 0 && (l.Append != seq || l.Stream != m.Stream) {
			x.next = l
			return m, true, nil
		}
		if len(m.Events) >= maxMessageEvents {
			return Message{}, false, &LimitError{File: x.path, Line: x.r.n, What: "the events of one append", Limit: maxMessageEvents, Count: true}
		}
		if size += len(l.Data) + len(l.Metadata); size > maxMessageBytes {
			return Message{}, false, &LimitError{File: x.path, Line: x.r.n, What: "the events of one append", Limit: maxMessageBytes}
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
				return Message{}, false, fmt.Errorf("%s: leaf: %w", x.r.where(), err)
			}
			link, err := ParseHash(l.Link)
			if err != nil {
				return Message{}, false, fmt.Errorf("%s: link: %w", x.r.where(), err)
			}
			m.Leaves, m.Links = append(m.Leaves, leaf), append(m.Links, link)
		}
	}
}
