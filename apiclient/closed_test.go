package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/gqlws"
)

// TestSubscribeSaysTheRelayWentAway: a relay that stops under a running
// `relay tail` (or agent) drops its WebSocket without a close frame; the
// client says so in words, and a close frame is still quoted as sent.
func TestSubscribeSaysTheRelayWentAway(t *testing.T) {
	tests := []struct {
		name string
		end  func(c *websocket.Conn)
		want string
	}{
		{"dropped", func(c *websocket.Conn) { c.UnderlyingConn().Close() },
			"lost the connection to the relay (1006 unexpected EOF: the relay stopped or restarted, or the network dropped it)"},
		{"shutting down", func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "relay shutting down"))
		}, "the relay went away (1001 relay shutting down): it is stopping or restarting"},
		{"closed", func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseTryAgainLater, "busy"))
		}, "server closed the connection (1013 busy)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := websocket.Upgrader{Subprotocols: []string{gqlws.Subprotocol}}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, err := up.Upgrade(w, r, nil)
				if err != nil {
					return
				}
				defer c.Close()
				if _, _, err := c.ReadMessage(); err != nil { // connection_init
					return
				}
				if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection_ack"}`)); err != nil {
					return
				}
				if _, _, err := c.ReadMessage(); err != nil { // subscribe
					return
				}
				tt.end(c)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := New(srv.URL, "tok").Subscribe(ctx, "subscription{ x }", nil, func(json.RawMessage) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Subscribe = %v, want %q", err, tt.want)
			}
		})
	}
}
