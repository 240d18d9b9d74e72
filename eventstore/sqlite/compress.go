package sqlite

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"

	"github.com/relayhq/relay/internal/sqlitedsn"
)

// An event's data is stored compressed (the s2 block format) when that
// makes it smaller by an eighth or more: the log grows less, and receipts
// that shrink under half a page share pages, so a commit writes fewer
// (docs/event-store.md; BenchmarkEncodeData: a Stripe event's receipt
// shrinks to 69 %, one of repeated lines to 20 %). The enc column says how a row's data is stored;
// rows written before it existed are raw. The chain hashes the data as
// given, never as stored, so compression changes no leaf or link.
const (
	encRaw = 0 // data as given
	encS2  = 1 // s2.Encode of the data
)

// compressMin and compressMax bound the data worth compressing: below
// compressMin a row is too small to gain a page; above compressMax the
// compressed copy held while the append waits for the writer would double
// a large body's memory, and such a body spans pages of its own anyway.
const (
	compressMin = 256
	compressMax = 1 << 20
)

// compressed holds s2's output buffers from an append's compression, on
// its caller's goroutine, to its commit, after which the writer puts them
// back (releaseRows): one fewer allocation of a body's size per event.
var compressed = sync.Pool{New: func() any { return new([]byte) }}

// maxPooled bounds the buffers kept for reuse: a large body's is left to
// the collector rather than held.
const maxPooled = 64 << 10

// encodeData returns data as it is stored and how. When stored is a
// compressed copy, buf holds it: put it back with releaseBuffer once
// nothing reads stored any more.
func encodeData(data []byte) (stored []byte, enc int64, buf *[]byte) {
	if len(data) < compressMin || len(data) > compressMax {
		return data, encRaw, nil
	}
	n := s2.MaxEncodedLen(len(data))
	buf = compressed.Get().(*[]byte)
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	c := s2.Encode((*buf)[:n], data)
	if len(c) > len(data)-len(data)/8 {
		releaseBuffer(buf)
		return data, encRaw, nil
	}
	return c, encS2, buf
}

// releaseBuffer puts a buffer of encodeData back for reuse.
func releaseBuffer(buf *[]byte) {
	if buf != nil && cap(*buf) <= maxPooled {
		compressed.Put(buf)
	}
}

// decodeData returns the data a row stores. A value that does not decode,
// or claims to decode to more than compressMax (nothing larger is ever
// compressed), is damage to the file (sqlitedsn.ErrDamagedValue): a claim is
// refused before anything is allocated for it.
func decodeData(stored []byte, enc int64) ([]byte, error) {
	switch enc {
	case encRaw:
		return stored, nil
	case encS2:
		n, err := s2.DecodedLen(stored)
		if err != nil {
			return nil, fmt.Errorf("%w: compressed data: %v", sqlitedsn.ErrDamagedValue, err)
		}
		if n > compressMax {
			return nil, fmt.Errorf("%w: compressed data claims %d bytes, more than is ever compressed", sqlitedsn.ErrDamagedValue, n)
		}
		out, err := s2.Decode(make([]byte, n), stored)
		if err != nil {
			return nil, fmt.Errorf("%w: compressed data: %v", sqlitedsn.ErrDamagedValue, err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: data stored as %d, which this build does not know", sqlitedsn.ErrDamagedValue, enc)
	}
}
