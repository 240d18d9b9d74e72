package bodyread

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// chunkReader returns body in reads of at most the sizes given in turn
// (cycling), and err once body is used up.
type chunkReader struct {
	body  []byte
	sizes []int
	i     int
	err   error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.body) == 0 {
		return 0, r.err
	}
	n := len(p)
	if len(r.sizes) > 0 {
		n = min(n, r.sizes[r.i%len(r.sizes)])
		r.i++
	}
	n = copy(p, r.body[:min(n, len(r.body))])
	r.body = r.body[n:]
	return n, nil
}

// checkRead asserts Read reads what io.ReadAll through
// io.LimitReader read before it: the same bytes, the same error, and the
// same bytes left for the reader after it.
func checkRead(t *testing.T, body []byte, sizes []int, fail error, keep, declared int64) {
	t.Helper()
	want, wantErr := io.ReadAll(io.LimitReader(&chunkReader{body: body, sizes: sizes, err: fail}, keep))
	wantRest, _ := io.ReadAll(&chunkReader{body: body[len(want):], err: io.EOF})
	r := &chunkReader{body: body, sizes: sizes, err: fail}
	got, err := Read(r, keep, declared)
	rest, _ := io.ReadAll(&chunkReader{body: r.body, err: io.EOF})
	if !bytes.Equal(got, want) || got == nil || err != wantErr || !bytes.Equal(rest, wantRest) {
		t.Fatalf("Read(%d bytes in reads of %v, then %v; keep %d, declared %d) = %d bytes (%v), rest %d; want %d bytes (%v), rest %d",
			len(body), sizes, fail, keep, declared, len(got), err, len(rest), len(want), wantErr, len(wantRest))
	}
}

func TestReadReadsAsReadAll(t *testing.T) {
	broken := errors.New("connection reset")
	body := bytes.Repeat([]byte("0123456789"), 1000)
	tests := []struct {
		name     string
		n        int
		sizes    []int
		fail     error
		keep     int64
		declared int64
	}{
		{"empty, declared", 0, nil, io.EOF, 256, 0},
		{"empty, unknown length", 0, nil, io.EOF, 256, -1},
		{"nothing kept", 100, nil, io.EOF, 0, 100},
		{"small, declared", 1024, nil, io.EOF, 256 << 10, 1024},
		{"small, unknown length", 1024, []int{7}, io.EOF, 256 << 10, -1},
		{"exactly keep", 256, nil, io.EOF, 256, 256},
		{"longer than keep", 10000, []int{100, 3}, io.EOF, 256, 10000},
		{"longer than declared", 5000, nil, io.EOF, 256 << 10, 100},
		{"shorter than declared", 100, nil, io.EOF, 256 << 10, 5000},
		{"past the first buffer", 10000, []int{999}, io.EOF, 256 << 10, 10000},
		{"a huge claim", 10, nil, io.EOF, 256 << 10, 1 << 62},
		{"cut short", 3000, []int{1000}, broken, 256 << 10, 4000},
		{"cut short at keep", 256, nil, broken, 256, 1000},
		{"an error with data", 500, []int{500}, io.ErrUnexpectedEOF, 256 << 10, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRead(t, body[:tt.n], tt.sizes, tt.fail, tt.keep, tt.declared)
		})
	}
}

func TestReadHoldsLittleForAClaim(t *testing.T) {
	got, err := Read(&chunkReader{body: []byte("x"), err: io.EOF}, 256<<10, 10<<20)
	if err != nil || string(got) != "x" || cap(got) > FirstRead+1 {
		t.Fatalf("Read of 1 byte declared as 10 MiB = %q (cap %d, %v), want cap at most %d", got, cap(got), err, FirstRead+1)
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte("hello"), uint16(3), uint16(16), int64(5), false)
	f.Add(bytes.Repeat([]byte("z"), 5000), uint16(1000), uint16(4096), int64(-1), true)
	f.Add([]byte{}, uint16(0), uint16(0), int64(0), false)
	f.Fuzz(func(t *testing.T, body []byte, chunk, keep uint16, declared int64, fail bool) {
		var sizes []int
		if chunk > 0 {
			sizes = []int{int(chunk), int(chunk)/2 + 1}
		}
		err := io.EOF
		if fail {
			err = io.ErrUnexpectedEOF
		}
		checkRead(t, body, sizes, err, int64(keep), max(declared, -1))
	})
}
