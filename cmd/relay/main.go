// Command relay is the webhook relay: `relay serve` runs the service,
// `relay agent` connects a local process to an Endpoint, `relay events`
// exports, verifies and rebuilds from the event log.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 1 for a failed operation, or the code an error names (such
// as 2 for the agent's *agentcli.RefusedError).
func exitCode(err error) int {
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return 1
}
