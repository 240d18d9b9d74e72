package connguard

import (
	"net/http"
	"time"
)

// writeStep is the most of an answer one write deadline covers: a write is
// made in steps of it, each given timeout to be taken by the client.
const writeStep = 32 << 10

// WriteProgress fails an HTTP/2 answer that makes no progress for timeout.
// Over HTTP/1.x the Listener's write deadline does it: an answer the client
// does not read fills the socket, and the blocked write fails. Over HTTP/2
// a client holds an answer with flow control instead (a zero window, or
// none given back), while it keeps its connection busy with other frames:
// nothing is written to the socket, no socket deadline runs, and the
// handler waits in its write for good, holding its answer (a GraphQL answer
// of up to 32 MiB, counted in the answer budget), its goroutine and its
// place among the client's requests in flight. So each write of an HTTP/2
// answer gets the stream's write deadline (http.ResponseController), timeout
// ahead for each writeStep bytes, lifted once written, so a stream idle
// between writes (a smee stream, a forward waiting for its local answer) is
// not cut; a stream whose deadline passes is reset and its write fails.
// What the handler leaves buffered is written by net/http after it returns:
// that too within timeout. A deadline a handler sets itself (smee's) is
// replaced during each write. Requests over HTTP/1.x pass untouched.
func WriteProgress(timeout time.Duration, h http.Handler) http.Handler {
	if timeout <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 {
			h.ServeHTTP(w, r)
			return
		}
		pw := &progressWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}
		h.ServeHTTP(pw, r)
		// Left set: the stream's close stops it. A stream already gone
		// (reset by the client) needs none.
		if r.Context().Err() == nil {
			_ = pw.rc.SetWriteDeadline(time.Now().Add(timeout))
		}
	})
}

// progressWriter writes within a deadline that moves with progress.
type progressWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (w *progressWriter) push() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) }
func (w *progressWriter) lift() { _ = w.rc.SetWriteDeadline(time.Time{}) }

func (w *progressWriter) Write(p []byte) (int, error) {
	defer w.lift()
	written := 0
	for {
		step := p[:min(len(p), writeStep)]
		w.push()
		n, err := w.ResponseWriter.Write(step)
		written += n
		p = p[n:]
		if err != nil || len(p) == 0 {
			return written, err
		}
	}
}

// FlushError flushes within the deadline; http.ResponseController finds it.
func (w *progressWriter) FlushError() error {
	w.push()
	defer w.lift()
	return w.rc.Flush()
}

// Flush is FlushError for callers of http.Flusher.
func (w *progressWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController and BodyProgress reach the server's
// own ResponseWriter.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
