// Package bodyread reads a body whose length its sender declared, into one
// buffer sized from that claim but never reserved beyond a constant before
// the bytes arrive: ingress reads a sender's body with it, the agent a
// local process's answer.
package bodyread

import "io"

// FirstRead bounds the buffer Read allocates before any byte has
// arrived: a sender's Content-Length is only its claim, so a sender that
// declares a large body and sends nothing holds no more than this (net/http
// holds as much per connection for its own reads). Bodies of up to 4 KiB
// (most webhooks and their answers) are read into one buffer of their size.
const FirstRead = 4 << 10

// Read reads up to keep bytes of body, as
// io.ReadAll(io.LimitReader(body, keep)) does, into a buffer sized from
// the declared length (-1: unknown): one allocation, not three, for a
// small body, and fewer reads. The buffer grows as bytes arrive, never
// past keep; it is never nil.
func Read(body io.Reader, keep, declared int64) ([]byte, error) {
	size := int64(512) // io.ReadAll's first buffer
	if declared >= 0 {
		size = min(declared, FirstRead) + 1 // room to read the end without growing
	}
	b := make([]byte, 0, min(size, keep, FirstRead))
	for int64(len(b)) < keep {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grows as append does
		}
		n, err := body.Read(b[len(b):min(int64(cap(b)), keep)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
