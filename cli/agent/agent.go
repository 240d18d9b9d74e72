// Package agent is `relay agent`: a local process connected to an Endpoint
// (package agentcli), and the JSON lines both it and listen print.
package agent

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/cli/cmdutil"
)

// agentCommand is `relay agent`: agentcli with its flags, the stored
// login, and a text observer.
func Command(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var cl agentcli.CommandLine
	var out cmdutil.Output
	var cpuProfile, tracePath string
	cmd := &cobra.Command{
		Use: "agent --endpoint ID[=TARGET]...",
		// IDs, not names: the agent needs no API call before it connects.
		Short: "Forward Endpoints' deliveries to local servers (for services and scripts)",
		Long: `Forward the deliveries of one or more Endpoints to servers on this machine,
over one connection to the relay, until interrupted.

TARGET is a port (3000), localhost:PORT, 127.0.0.1:PORT, or a URL such as
http://localhost:3000/api (its path goes in front of every recorded path)
or https://localhost:8443 (--insecure for a self-signed certificate). An
Endpoint given without a target uses --target, else its stored target.

The token comes from relay login or RELAY_TOKEN=<token>; --token works too
but shows the token to every local user in the process list.

Network trouble and relay restarts are retried with backoff; a refused
token or an unknown Endpoint ends the command with exit code 2.`,
		Example: `  relay agent --endpoint hwnmnoikuriuxmqp=3000
  relay agent --endpoint hwnmnoikuriuxmqp=3000 --endpoint ug5dq4ukfunngyp2=http://localhost:4000/hooks
  RELAY_TOKEN=<token> relay agent --server https://relay.example.com --endpoint hwnmnoikuriuxmqp --target 8080`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			if conn.TokenFlag {
				fmt.Fprintln(stderr, agentcli.TokenFlagWarning)
			}
			if conn.Token == "" {
				return cmdutil.ErrNotLoggedIn
			}
			cl.CAFile = conn.CAFile
			o, err := cl.Options(conn.Server, conn.Token)
			if err != nil {
				return err
			}
			stop, err := cmdutil.StartProfiles(cpuProfile, tracePath)
			defer stop()
			if err != nil {
				return err
			}
			SetRuntime(env)
			o.Observer = &agentcli.TextObserver{Out: stdout, Status: stderr, Color: cmdutil.Colourful(stdout, env)}
			if out.JSON() {
				o.Observer = NewJSONObserver(stdout, stderr)
			}
			return agentcli.Serve(c.Context(), o)
		},
	}
	conn.Flags(cmd.Flags())
	cl.AddFlags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for performance work)")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	cmd.Flags().StringVar(&tracePath, "trace", "", "write an execution trace of the whole run to this file (for latency work)")
	_ = cmd.Flags().MarkHidden("trace")
	return cmd
}

// MemoryLimit is the agent's soft memory limit (relay agent, relay listen),
// unless GOMEMLIMIT is set (cmdutil.SetGC).
const MemoryLimit = 512 << 20

// SetRuntime sets the Go runtime as the agent runs (relay agent, relay
// listen): its GC target and memory limit, and one P (cmdutil.OneProc),
// each unless its environment variable is set.
func SetRuntime(env func(string) string) {
	cmdutil.SetGC(env, MemoryLimit)
	cmdutil.OneProc(env)
}
