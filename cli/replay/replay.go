// Package replay is `relay replay`: a replay bundle sent again without a relay (package replay).
package replay

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain/duration"
	offline "github.com/relayhq/relay/replay"
)

// Command is `relay replay`.
func Command(stdout io.Writer) *cobra.Command {
	var out cmdutil.Output
	var to string
	var only []string
	var concurrency int
	var delay, timeout time.Duration
	var insecure bool
	inFlight := cmdutil.ByteSize(offline.DefaultInFlightBytes)
	cmd := &cobra.Command{
		Use:   "replay BUNDLE --to URL",
		Short: "Send the requests of a replay bundle again, byte for byte, to a server",
		Long: `Send the requests of a replay bundle (relay deliveries export --format bundle)
to the server at --to, in recorded order, without a relay: the method, the
raw path and query, every header in order with repeats, and the body, as the
sender sent them. The Host header names --to's host. Each request goes over a
connection of its own; a line per request says what the server answered.

Nothing is sent when a line of the bundle is malformed. Deliveries stored in
part are skipped and said so. Exits 1 when a request got no answer (the
server refused the connection, closed it, or timed out).`,
		Example: `  relay replay stripe.bundle --to http://localhost:3000
  relay replay stripe.bundle --to http://localhost:3000/api --only 01a208a2-... --only 01a208a3-...
  relay replay stripe.bundle --to https://staging.example.com --concurrency 4 --delay 100ms
  relay replay big.bundle --to http://localhost:3000 --concurrency 8 --max-in-flight 256MiB`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if _, err := os.Stat(args[0]); errors.Is(err, fs.ErrNotExist) {
				return cmdutil.Usage(noBundle(args[0]))
			}
			target, err := offline.ParseTarget(to)
			if err != nil {
				return err
			}
			target.Insecure = insecure
			if concurrency < 1 || concurrency > offline.MaxConcurrency {
				return cmdutil.Usage(fmt.Errorf("--concurrency %d: want 1 to %d", concurrency, offline.MaxConcurrency))
			}
			if delay < 0 || timeout <= 0 {
				return cmdutil.Usage(errors.New("--delay must not be negative and --timeout must be positive"))
			}
			r := offline.Replayer{Target: target, Timeout: timeout, Delay: delay, Concurrency: concurrency, JSON: out.JSON(), Stdout: stdout,
				InFlightBytes: int64(inFlight)}
			return r.Run(c.Context(), args[0], only)
		},
	}
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&to, "to", "", "the server to send to: http(s)://host[:port][/prefix]")
	cmd.Flags().StringArrayVar(&only, "only", nil, "send only this delivery id (repeatable)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 1, "requests in flight at once, --max-in-flight of them at most (lines are still printed in recorded order)")
	cmd.Flags().Var(&inFlight, "max-in-flight", "bytes the requests in flight may hold together (their decoded bodies and headers); a larger request is sent alone")
	cmd.Flags().Var(duration.NewFlag(&delay, 0), "delay", "wait this long before each request after the first")
	cmd.Flags().Var(duration.NewFlag(&timeout, 30*time.Second), "timeout", "bound on each request: connect, send, and the answer's headers")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "with an https --to: accept any certificate (a local server's self-signed one)")
	return cmd
}

// noBundle is the refusal of a BUNDLE that is no file. A delivery's id is
// what a user who means relay retry types here, so that one names it.
func noBundle(arg string) error {
	if _, err := uuid.Parse(arg); err == nil {
		return fmt.Errorf("replay: %s is a delivery id, not a bundle file: relay retry %s sends a stored delivery again through the listener; relay replay sends the requests of a file that relay deliveries export ADDRESS --format bundle -o FILE wrote", arg, arg)
	}
	return fmt.Errorf("replay: no bundle file %s: give the file relay deliveries export ADDRESS --format bundle -o FILE wrote", arg)
}
