package connguard

import (
	"io"
	"net/http"
	"time"
)

// BodyProgress fails a request body that makes no progress for timeout: the
// read deadline of the connection is set to timeout from each read of the
// body, so a slow but steady upload of any size succeeds, and a sender that
// declares a body and goes silent loses its connection. The read that
// fails returns an error matching os.ErrDeadlineExceeded to the handler.
// Requests without a body (WebSocket upgrades among them) are left alone;
// an Upgrade header does not exempt a body. h must be given the
// server's own ResponseWriter (mount BodyProgress outermost).
func BodyProgress(timeout time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		conn, ok := readDeadline(w)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		b := &progressBody{body: r.Body, conn: conn, timeout: timeout, left: r.ContentLength}
		// Set once before the handler runs, so a body the handler never
		// reads cannot stall net/http's own read of what is left either.
		if err := b.push(); err != nil {
			h.ServeHTTP(w, r)
			return
		}
		r.Body = b
		h.ServeHTTP(w, r)
	})
}

// readDeadline finds what sets the read deadline of w's connection,
// unwrapping w as http.ResponseController does on each of its calls:
// found once per request, it costs no ResponseController (an allocation)
// and no walk per read.
func readDeadline(w http.ResponseWriter) (deadliner, bool) {
	for {
		switch t := w.(type) {
		case deadliner:
			return t, true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil, false
		}
	}
}

type deadliner interface {
	SetReadDeadline(time.Time) error
}

type progressBody struct {
	body    io.ReadCloser
	conn    deadliner
	timeout time.Duration
	left    int64 // bytes still declared, or -1 when the length is unknown
	done    bool
}

func (b *progressBody) push() error { return b.conn.SetReadDeadline(time.Now().Add(b.timeout)) }

func (b *progressBody) Read(p []byte) (int, error) {
	if !b.done {
		_ = b.push()
	}
	n, err := b.body.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	// A failed read keeps its deadline: net/http may read on to discard
	// the rest of the body, and that must fail too rather than wait.
	if err == io.EOF || (err == nil && b.left == 0) {
		b.finish()
	}
	return n, err
}

// finish lifts the deadline once the body is read, and stops pushing it:
// net/http then watches the idle connection for the client's hang-up (it
// lifts the deadline itself when it starts that watch), and a deadline
// set during the watch would end it, and cancel the request, while the
// handler still works (a forward waits far longer than a body may stall).
func (b *progressBody) finish() {
	if !b.done {
		b.done = true
		_ = b.conn.SetReadDeadline(time.Time{})
	}
}

func (b *progressBody) Close() error {
	return b.body.Close()
}
