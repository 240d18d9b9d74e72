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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
	}
	os.Exit(cmdutil.ExitCode(err))
}
