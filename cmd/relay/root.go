package main

import (
	"context"
	"fmt"
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
		// With Args and RunE set, an unknown command reaches this check
		// (a usage error, exit 2) instead of cobra's untyped error.
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.Usage(fmt.Errorf("unknown command %q (see relay --help)", args[0]))
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	root.SetVersionTemplate("relay {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.Usage(err) })
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(commands(env, stdin, stdout, stderr)...)
	groupCommands(root)
	return root.ExecuteContext(ctx)
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
		{"start", "Getting started:", []string{"login", "logout", "listen", "open"}},
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
