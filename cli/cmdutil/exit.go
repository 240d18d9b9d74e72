// Package cmdutil is what every client command shares: the connection to
// a relay (--server, --token, --ca-file), -o text|json, exit codes, the
// terminal prompts and the backoff of the long-running commands.
package cmdutil

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

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

// UsageArgs makes a cobra argument check's error a usage error that names
// the command, says whether an argument is missing or one too many, and
// gives the command's usage line, instead of cobra's count ("accepts 1
// arg(s), received 0"). A check already wrapped passes through.
func UsageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		err := check(cmd, args)
		var u *UsageError
		if err == nil || errors.As(err, &u) {
			return err
		}
		problem := fmt.Sprintf("too many arguments (%s)", strings.Join(quoted(args), " "))
		if check(cmd, append(args[:len(args):len(args)], "")) == nil {
			problem = "missing argument"
		}
		return Usage(fmt.Errorf("%s%s; usage: %s (%s --help has examples)", commandName(cmd), problem, cmd.UseLine(), cmd.CommandPath()))
	}
}

// FlagError is a command's flag error (unknown flag, missing or bad
// value) as a usage error naming the command and where its flags are
// listed.
func FlagError(cmd *cobra.Command, err error) error {
	hint := ""
	switch {
	case err.Error() == "unknown flag: --json" && cmd.Flags().Lookup("output") != nil:
		hint = "; JSON is -o json" // what gh and others call --json
	case !cmd.HasParent() && strings.HasPrefix(err.Error(), "unknown shorthand flag: 'V'"):
		hint = "; the version is relay version (or -v)" // what other tools call -V
	}
	return Usage(fmt.Errorf("%s%w%s (%s --help lists the flags)", commandName(cmd), err, hint, cmd.CommandPath()))
}

// UnknownCommand is the argument check of a command that only groups
// others (and of the program itself): a word that is none of them is a
// usage error that names the closest ones, not cobra's help and exit 0.
func UnknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's, which only its own error path sets
	}
	hint := ""
	s := namedFor(cmd, args[0])
	if len(s) == 0 {
		s = namedElsewhere(cmd.Root(), args[0])
	}
	if len(s) == 0 {
		s = cmd.SuggestionsFor(args[0])
	}
	if len(s) > 0 {
		hint = "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return Usage(fmt.Errorf("%sunknown command %q%s (%s --help lists the commands)", commandName(cmd), args[0], hint, cmd.CommandPath()))
}

// namedFor is the subcommands of cmd that list word in their SuggestFor
// (the word other webhook tools use for them: Stripe CLI's logs for tail).
// They are the whole hint when there are any: a command one letter
// away in spelling ("logs" and "login") is not what such a user means.
func namedFor(cmd *cobra.Command, word string) []string {
	var named []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() && slices.Contains(sub.SuggestFor, strings.ToLower(word)) {
			named = append(named, sub.Name())
		}
	}
	return named
}

// namedElsewhere is the full paths ("relay retry", "relay tokens list") of
// the commands anywhere under root that list word in their SuggestFor: a
// word typed under one group (events resend) may name a command of another
// (retry).
func namedElsewhere(root *cobra.Command, word string) []string {
	var named []string
	for _, sub := range root.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		if slices.Contains(sub.SuggestFor, strings.ToLower(word)) {
			named = append(named, sub.CommandPath())
		}
		named = append(named, namedElsewhere(sub, word)...)
	}
	return named
}

// commandName is cmd's path below the program's name and a colon,
// "deliveries show: ", or "" for the program itself (which prints its own
// name in front of every error).
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") + ": "
}

func quoted(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return q
}

var NoArgs = UsageArgs(cobra.NoArgs)
