package wsgql

import (
	"bufio"
	"net"
	"net/http"

	"github.com/relayhq/relay/internal/cork"
)

// corkingWriter hands gorilla's upgrader a cork.Conn when it hijacks the
// connection, and keeps it for the writer: the writer sends the messages
// it finds queued together in one write (under load, the relay's Done and
// forward frames to an agent come several at a time).
type corkingWriter struct {
	http.ResponseWriter
	conn *cork.Conn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = cork.New(nc)
	return w.conn, brw, nil
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
