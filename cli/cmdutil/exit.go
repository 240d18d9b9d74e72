// Package cmdutil is what every client command shares: the connection to
// a relay (--server, --token, --ca-file), -o text|json, exit codes, the
// terminal prompts and the backoff of the long-running commands.
package cmdutil

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
)

// Exit codes of every command: 0 success, 1 the operation failed (network,
// server error, a retried request that was not answered 2xx), 2 usage or
// refusal (bad flags or arguments, a token the relay refuses, an unknown id).
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitRefused = 2
)

// UsageError is a command line the program cannot act on.
type UsageError struct{ err error }

func (e *UsageError) Error() string { return e.err.Error() }
func (e *UsageError) Unwrap() error { return e.err }

// Usage marks err as a usage error (exit 2).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{err: err}
}

// ExitCode maps the error run returned to the process's exit code. An
// error may name its own (the agent's refusal, a data folder in use).
func ExitCode(err error) int {
	var u *UsageError
	var r *apiclient.Error
	var coded interface{ ExitCode() int }
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitRefused
	case errors.As(err, &r) && r.Refusal():
		return ExitRefused
	case errors.As(err, &coded):
		return coded.ExitCode()
	}
	return ExitFailed
}

// UsageArgs makes a cobra argument check's error a usage error.
func UsageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return Usage(check(cmd, args)) }
}

var NoArgs = UsageArgs(cobra.NoArgs)
