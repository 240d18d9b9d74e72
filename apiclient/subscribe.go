package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/termtext"
)

// Subscription timing: the client pings, and a socket silent for longer
// than subscribeSilence is dead.
const (
	subscribePing    = 5 * time.Second
	subscribeSilence = 20 * time.Second
)

// WebSocketURL is server's GraphQL WebSocket URL: ws(s)://host/graphql.
func WebSocketURL(server string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("%q: scheme must be http, https, ws or wss", server)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", server)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/graphql"), "/") + "/graphql"
	u.RawPath, u.Fragment = "", ""
	return u.String(), nil
}

// Subscribe runs one GraphQL subscription over a graphql-transport-ws
// WebSocket and calls next with the data of each result. It returns nil
// when ctx ends or the server completes the subscription; an *Error when
// the relay refuses it (a GraphQL error, or a 4401/4403 close); next's
// error when next fails; else the connection's failure, which a caller may
// retry.
func (c *Client) Subscribe(ctx context.Context, query string, vars map[string]any, next func(data json.RawMessage) error) error {
	ws, err := WebSocketURL(c.Server)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	var hs *HandshakeConn
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: subscribeSilence, Subprotocols: []string{gqlws.Subprotocol}, TLSClientConfig: c.TLS,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{Timeout: subscribeSilence, KeepAlive: 30 * time.Second}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			hs = LimitHandshake(nc)
			return hs, nil
		}}
	conn, resp, err := dialer.DialContext(ctx, ws, nil)
	if hs != nil {
		hs.Upgraded()
	}
	if err != nil {
		if resp != nil {
			resp.Body.Close()
			return fmt.Errorf("connect to %s: %w (%s)", ws, err, resp.Status)
		}
		if AnsweredPlainHTTP(err) {
			return &PlainHTTPError{Server: c.Server, Err: err}
		}
		return fmt.Errorf("connect to %s: %w", ws, err)
	}
	defer conn.Close()
	// One message is one result: bounded as Do bounds an answer.
	conn.SetReadLimit(maxAnswer)
	var writeMu sync.Mutex
	write := func(v any) error {
		writeMu.Lock()
		defer writeMu.Unlock()
		conn.SetWriteDeadline(time.Now().Add(subscribeSilence))
		return conn.WriteJSON(v)
	}
	// writeJSON sends a message whose payload is v as JSON.
	writeJSON := func(typ, id string, v any) error {
		payload, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return write(gqlws.Message{ID: id, Type: typ, Payload: payload})
	}
	// Ending ctx closes the socket normally, which unblocks the reader.
	stop := context.AfterFunc(ctx, func() {
		writeMu.Lock()
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		writeMu.Unlock()
		conn.Close()
	})
	defer stop()

	init := map[string]any{}
	if c.Token != "" {
		init["Authorization"] = "Bearer " + c.Token
	}
	if err := writeJSON(gqlws.ConnectionInit, "", init); err != nil {
		return c.wsErr(ctx, err)
	}
	if err := writeJSON(gqlws.Subscribe, "1", gqlws.SubscribePayload{Query: &query, Variables: vars}); err != nil {
		return c.wsErr(ctx, err)
	}
	pingDone := make(chan struct{})
	defer close(pingDone)
	go func() {
		t := time.NewTicker(subscribePing)
		defer t.Stop()
		for {
			select {
			case <-pingDone:
				return
			case <-t.C:
				if write(gqlws.Message{Type: gqlws.Ping}) != nil {
					return
				}
			}
		}
	}()
	for {
		conn.SetReadDeadline(time.Now().Add(subscribeSilence))
		// A message is weighed and counted as it arrives, as Do's answer
		// is, its result's errors by what they decode into (its data stays
		// raw for next), and refused once the part read passes a bound.
		_, r, err := conn.NextReader()
		if err != nil {
			return c.wsErr(ctx, err)
		}
		text, bounds, err := readAnswer(r, -1, messageType)
		if bounds != nil {
			return fmt.Errorf("decode subscription result: %w", bounds)
		}
		if err != nil {
			return c.wsErr(ctx, err)
		}
		var m gqlws.Message
		if err := json.Unmarshal(text, &m); err != nil {
			return c.wsErr(ctx, err)
		}
		switch m.Type {
		case gqlws.Ping:
			if err := write(gqlws.Message{Type: gqlws.Pong}); err != nil {
				return c.wsErr(ctx, err)
			}
		case gqlws.Next:
			var res struct {
				Data   json.RawMessage
				Errors []wireError
			}
			if err := json.Unmarshal(m.Payload, &res); err != nil {
				return fmt.Errorf("decode subscription result: %w", err)
			}
			if len(res.Errors) > 0 {
				return res.Errors[0].err()
			}
			if err := next(res.Data); err != nil {
				return err
			}
		case gqlws.Error:
			var errs []wireError
			if CheckDecode(m.Payload, &errs) != nil || json.Unmarshal(m.Payload, &errs) != nil || len(errs) == 0 {
				return fmt.Errorf("subscription error: %s", termtext.Safe(string(m.Payload[:min(len(m.Payload), 200)]), false))
			}
			return errs[0].err()
		case gqlws.Complete:
			return nil
		}
	}
}

// messageType is what Subscribe weighs a message as while it arrives: a
// result's errors as decoded, its data raw (an error message's payload,
// a list, is weighed once read).
var messageType = reflect.TypeFor[*struct {
	ID, Type string
	Payload  struct {
		Data   json.RawMessage
		Errors []wireError
	}
}]()

// wsErr explains a failed socket: refusals as *Error, nothing when ctx
// ended it.
func (c *Client) wsErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		switch ce.Code {
		case gqlws.CloseUnauthorized:
			return &Error{Message: ce.Text, Code: "UNAUTHENTICATED"}
		case gqlws.CloseForbidden:
			return &Error{Message: ce.Text, Code: "FORBIDDEN"}
		}
		return ClosedError(ce)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no message from server within %s", subscribeSilence)
	}
	return err
}

// ClosedError says why the relay's WebSocket ended: a close frame's code
// and text, or, for a connection that ended without one (1006: the relay
// stopped or restarted, or the network dropped it) or one that went away
// (1001: the relay is shutting down), that in words rather than as
// "1006 unexpected EOF" alone.
func ClosedError(ce *websocket.CloseError) error {
	switch ce.Code {
	case websocket.CloseAbnormalClosure:
		return fmt.Errorf("lost the connection to the relay (%d %s: the relay stopped or restarted, or the network dropped it)", ce.Code, ce.Text)
	case websocket.CloseGoingAway:
		return fmt.Errorf("the relay went away (%d %s): it is stopping or restarting", ce.Code, ce.Text)
	}
	return fmt.Errorf("server closed the connection (%d %s)", ce.Code, ce.Text)
}
