package graph

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

// PositionHeader carries log positions for read-your-writes across nodes:
// the answer to a change holds the log position of that change; a request
// that holds one is served once this node's views have reached it. A
// WebSocket gives it in its connection_init payload as relayPosition.
const PositionHeader = "X-Relay-Position"

// readYourWrites waits (bounded by the views wait) for the position a
// request names, then serves it and puts the position of what it changed,
// if anything, in the answer's PositionHeader.
func readYourWrites(svc *commands.Service, present graphql.ErrorPresenterFunc, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(PositionHeader); v != "" {
			pos, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				err = fmt.Errorf("%w: %s must be a log position", domain.ErrInvalidInput, PositionHeader)
				writeErrors(w, http.StatusBadRequest, present(r.Context(), err))
				return
			}
			if err := svc.ReadAfter(r.Context(), pos); err != nil {
				w.Header().Set("Retry-After", "1")
				writeErrors(w, http.StatusServiceUnavailable, present(r.Context(), err))
				return
			}
		}
		if websocket.IsWebSocketUpgrade(r) {
			// The socket's connection_init names its position; its
			// answers are messages, not headers.
			next.ServeHTTP(w, r)
			return
		}
		ctx, writes := commands.WithWrites(r.Context())
		next.ServeHTTP(&positionWriter{ResponseWriter: w, writes: writes}, r.WithContext(ctx))
	})
}

// positionWriter sets PositionHeader as the answer starts.
type positionWriter struct {
	http.ResponseWriter
	writes  *commands.Writes
	written bool
}

func (p *positionWriter) start() {
	if p.written {
		return
	}
	p.written = true
	if pos := p.writes.Position(); pos > 0 {
		p.Header().Set(PositionHeader, strconv.FormatUint(pos, 10))
	}
}

func (p *positionWriter) WriteHeader(status int) {
	p.start()
	p.ResponseWriter.WriteHeader(status)
}

func (p *positionWriter) Write(b []byte) (int, error) {
	p.start()
	return p.ResponseWriter.Write(b)
}

func (p *positionWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// initPosition waits for the relayPosition a connection_init payload
// names (a number, or its decimal text) before the socket authenticates:
// a token just issued on another node is then known here.
func initPosition(ctx context.Context, svc *commands.Service, p map[string]any) error {
	var pos uint64
	switch v := p["relayPosition"].(type) {
	case nil:
		return nil
	case float64:
		if v < 0 || v != float64(uint64(v)) {
			return fmt.Errorf("%w: relayPosition must be a log position", domain.ErrInvalidInput)
		}
		pos = uint64(v)
	case string:
		var err error
		if pos, err = strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("%w: relayPosition must be a log position", domain.ErrInvalidInput)
		}
	default:
		return fmt.Errorf("%w: relayPosition must be a log position", domain.ErrInvalidInput)
	}
	return svc.ReadAfter(ctx, pos)
}
