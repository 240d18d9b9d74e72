package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
)

// Exit codes of every command: 0 success, 1 the operation failed (network,
// server error, a retried request that was not answered 2xx), 2 usage or
// refusal (bad flags or arguments, a token the relay refuses, an unknown id).
const (
	exitOK      = 0
	exitFailed  = 1
	exitRefused = 2
)

// usageError is a command line the program cannot act on.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usage marks err as a usage error (exit 2).
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err: err}
}

// exitCode maps the error run returned to the process's exit code. An
// error may name its own (the agent's refusal, a data folder in use).
func exitCode(err error) int {
	var u *usageError
	var r *apiclient.Error
	var coded interface{ ExitCode() int }
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &u):
		return exitRefused
	case errors.As(err, &r) && r.Refusal():
		return exitRefused
	case errors.As(err, &coded):
		return coded.ExitCode()
	}
	return exitFailed
}

// usageArgs makes a cobra argument check's error a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return usage(check(cmd, args)) }
}

var noArgs = usageArgs(cobra.NoArgs)
