package connguard

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// Bounds of Linger: what a client that keeps sending after an early answer
// may still send, and for how long, before the connection is closed on it.
const (
	LingerBytes = 16 << 20
	LingerTime  = 5 * time.Second
)

// Linger is nginx's lingering close for an answer given before the request
// body was read (a 413, or a 503 for a body the relay has no room for): it
// flushes the answer, then reads and discards what the client still sends,
// up to LingerBytes and LingerTime. Closing at once with unread input in
// the socket makes the kernel reset the connection, and a reset destroys
// the answer the client has not read yet: a client that keeps writing saw
// ECONNRESET instead of its 413. body is the request's own body, not a
// limited reader that already stopped.
func Linger(w http.ResponseWriter, body io.Reader) {
	if body == nil || body == http.NoBody {
		return
	}
	_ = http.NewResponseController(w).Flush()
	deadline := time.Now().Add(LingerTime)
	bp := lingerBufs.Get().(*[]byte)
	defer lingerBufs.Put(bp)
	buf := *bp
	var read int64
	for read < LingerBytes && time.Now().Before(deadline) {
		n, err := body.Read(buf)
		read += int64(n)
		if err != nil {
			return
		}
	}
}

// lingerBufs are the buffers Linger discards into: a flood of refused
// bodies (every one lingered on) made one of 32 KiB each, 40 000 in ten
// seconds from one address, garbage that raised the relay's peak memory.
var lingerBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
