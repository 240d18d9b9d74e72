package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/accounts"
	"github.com/relayhq/relay/cli/agent"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/deliveries"
	"github.com/relayhq/relay/cli/endpoints"
	"github.com/relayhq/relay/cli/events"
	"github.com/relayhq/relay/cli/inspector"
	"github.com/relayhq/relay/cli/listen"
	"github.com/relayhq/relay/cli/login"
	"github.com/relayhq/relay/cli/members"
	"github.com/relayhq/relay/cli/open"
	"github.com/relayhq/relay/cli/replay"
	"github.com/relayhq/relay/cli/serve"
	"github.com/relayhq/relay/cli/stats"
	"github.com/relayhq/relay/cli/tokens"
	"github.com/relayhq/relay/cli/version"
	"github.com/relayhq/relay/cli/whoami"
)

// run builds the command tree and executes it; main only wires signals.
// Its error maps to the exit code through cmdutil.ExitCode.
func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:   "relay",
		Short: "Self-hostable webhook relay: record, inspect, forward and replay webhooks",
		Long: `Self-hostable webhook relay: record, inspect, forward and replay webhooks.

Run the relay with relay serve; log in to it with relay login, then
relay listen PORT gives your local server a public URL for webhooks.`,
		Example: `  relay login --server http://localhost:8080 --signup me
  relay listen 3000
  relay deliveries list my-app --status 5xx
  relay retry 01a208a2-aff8-775f-a025-ad928fea45ad`,
		Version:       version.Text(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("relay {{.Version}}\n")
	root.SetFlagErrorFunc(cmdutil.FlagError)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(commands(env, stdin, stdout, stderr)...)
	groupCommands(root)
	usageChecks(root)
	err := root.ExecuteContext(ctx)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Ctrl-C (or SIGTERM) during a command that ends with it: said
		// as such, not as the "context canceled" of the call it cut.
		return errInterrupted
	}
	return err
}

// errInterrupted ends a command stopped by a signal before it finished
// (exit 1: the operation did not complete).
var errInterrupted = errors.New("interrupted")

// usageChecks gives every command one way to refuse a command line: a
// command that groups others (relay itself, relay events, ...) refuses a
// word that is none of them, naming the closest, where cobra would print
// its help and exit 0; every argument check says what is missing or too
// many with the command's usage (cmdutil.UsageArgs).
func usageChecks(c *cobra.Command) {
	if c.HasSubCommands() {
		c.Args = cmdutil.UnknownCommand
		if !c.Runnable() {
			c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		}
	} else if c.Args != nil {
		c.Args = cmdutil.UsageArgs(c.Args)
	}
	for _, sub := range c.Commands() {
		usageChecks(sub)
	}
}

// commands is every command of relay; groupCommands puts them under the
// headings of relay --help.
func commands(env func(string) string, stdin io.Reader, stdout, stderr io.Writer) []*cobra.Command {
	return []*cobra.Command{
		serve.Command(env, stdout, stderr),
		agent.Command(env, stdout, stderr),
		events.Command(env, stdout, stderr),
		accounts.Command(env, stdout, stderr),
		listen.Command(env, stdin, stdout, stderr),
		endpoints.Command(env, stdout),
		tokens.Command(env, stdout),
		members.Command(env, stdout),
		inspector.Command(env, stdout),
		stats.Command(env, stdout),
		deliveries.Command(env, stdout, stderr),
		deliveries.TailCommand(env, stdout, stderr),
		open.Command(env, stdout, stderr),
		deliveries.RetryCommand(env, stdout),
		replay.Command(stdout),
		login.Command(env, stdin, stdout, stderr),
		login.LogoutCommand(env, stdout, stderr),
		whoami.Command(env, stdout),
		version.Command(stdout),
	}
}

// groupCommands sorts the commands of relay --help under headings, as gh
// and stripe do.
func groupCommands(root *cobra.Command) {
	groups := []struct {
		id, title string
		names     []string
	}{
		{"start", "Getting started:", []string{"login", "logout", "whoami", "listen", "open"}},
		{"data", "Endpoints and deliveries:", []string{"endpoints", "inspector", "deliveries", "stats", "tail", "retry", "replay"}},
		{"team", "Your account and team:", []string{"tokens", "members"}},
		{"run", "Running a relay:", []string{"serve", "agent", "accounts", "events"}},
	}
	for _, g := range groups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, c := range root.Commands() {
			for _, n := range g.names {
				if c.Name() == n {
					c.GroupID = g.id
				}
			}
		}
	}
}
