// Command relay is the webhook relay: `relay serve` runs the service,
// `relay agent` connects a local process to an Endpoint, `relay events`
// exports, verifies and rebuilds from the event log, `relay login` stores
// a relay and token for the client commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/termtext"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		// An error may quote a server's message: printed without the
		// control characters that would drive the terminal.
		fmt.Fprintln(os.Stderr, "relay:", termtext.Safe(err.Error(), true))
	}
	os.Exit(cmdutil.ExitCode(err))
}
