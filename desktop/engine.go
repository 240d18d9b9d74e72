package desktop

import (
	"context"
	"errors"
)

// serveAgent runs the agent library for routes.
func serveAgent(ctx context.Context, server, token string, routes []Route, ev events) error {
	return errors.New("agent library not wired yet")
}
