package deliveries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/termtext"
)

// maxTailSeen bounds the delivery ids tail remembers to print each
// change once.
const maxTailSeen = 10000

// TailCommand is `relay tail`.
func TailCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use: "tail ADDRESS",
		// Stripe CLI's logs tail, heroku logs.
		SuggestFor: []string{"logs", "log"},
		Short:      "Print an Endpoint's or inspector's deliveries live, as they arrive",
		Long: `Print an Endpoint's or inspector's deliveries live, as they arrive and as
their answers are recorded, until interrupted. ADDRESS is an Endpoint's id
or name, or an inspector's id. A dropped connection is resumed with backoff
from the last delivery seen, so none is missed.`,
		Example: `  relay tail stripe
  relay tail ep-abc123 -o json | jq -r .path`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			ctx := c.Context()
			client := conn.Client(conn.Token)
			var address string
			seen := map[string]string{} // delivery id → what was printed of it
			var since *string
			err := cmdutil.UntilReachable(ctx, stderr, func() (err error) {
				var kind string
				kind, address, err = ResolveAddress(ctx, client, args[0])
				if err != nil {
					return err
				}
				since, err = tailStart(ctx, client, kind, address, seen)
				return err
			})
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return err
			}
			q := `subscription($a: ID!, $s: String){ deliveries(address: $a, since: $s){ ` + deliveryRowFields + ` } }`
			bo := cmdutil.NewBackoff()
			fmt.Fprintf(stderr, "tailing %s (Ctrl-C to stop)\n", address)
			for {
				started := time.Now()
				err := client.Subscribe(ctx, q, map[string]any{"a": address, "s": since}, func(data json.RawMessage) error {
					var res struct{ Deliveries apiDeliveryRow }
					// Weighed by the rows it decodes into, as Do weighs answers.
					if err := apiclient.CheckDecode(data, &res); err != nil {
						return fmt.Errorf("decode delivery: %w", err)
					}
					if err := json.Unmarshal(data, &res); err != nil {
						return fmt.Errorf("decode delivery: %w", err)
					}
					d := res.Deliveries
					cursor := d.Cursor
					since = &cursor
					row := d.row()
					key := tailKey(row)
					if seen[row.ID] == key {
						return nil
					}
					if len(seen) >= maxTailSeen {
						clear(seen) // a row seen again at worst prints twice
					}
					seen[row.ID] = key
					if out.JSON() {
						return cmdutil.WriteJSONLine(stdout, row)
					}
					at := row.ReceivedAt
					if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
						at = t.Local().Format("15:04:05")
					}
					status := statusText(row.ResponseStatus)
					if row.ResponseStatus == nil {
						status = "pending"
					}
					_, err := fmt.Fprintf(stdout, "%s %s %s → %s  delivery %s\n", at, row.Method, termtext.Safe(row.Path, false), status, row.ID)
					if err == nil && row.Hint != nil {
						_, err = fmt.Fprintf(stdout, "  hint: %s\n", termtext.Safe(*row.Hint, false))
					}
					return err
				})
				if ctx.Err() != nil {
					return nil
				}
				var refused *apiclient.Error
				if errors.As(err, &refused) && refused.Refusal() {
					return fmt.Errorf("tail: %w", err)
				}
				if err == nil {
					err = errors.New("the relay ended the subscription")
				}
				if time.Since(started) > time.Minute {
					bo.Reset()
				}
				delay := bo.NextBackOff()
				fmt.Fprintf(stderr, "disconnected: %v; reconnecting in %s\n", err, delay.Round(100*time.Millisecond))
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(delay):
				}
			}
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

// tailKey is what tail printed of a row: it prints a row again only when
// this changes.
func tailKey(row deliveryRow) string {
	return fmt.Sprint(statusText(row.ResponseStatus), row.Attempts)
}

// tailStart is where tail begins: after the newest delivery of the
// address, with the rows already there marked as seen. Starting from a
// cursor rather than from whenever the subscription reaches the relay
// means a delivery sent right after "tailing" is printed is not missed.
func tailStart(ctx context.Context, client *apiclient.Client, kind, id string, seen map[string]string) (*string, error) {
	q := fmt.Sprintf(`query($a: ID!){ %s(id: $a){ deliveries(first: 50){ nodes{ %s } } } }`, kind, deliveryRowFields)
	var res map[string]*struct {
		Deliveries struct{ Nodes []apiDeliveryRow }
	}
	if err := client.Do(ctx, q, map[string]any{"a": id}, &res); err != nil {
		return nil, fmt.Errorf("read the newest deliveries: %w", err)
	}
	start := "" // an empty history: every change is new
	if a := res[kind]; a != nil && len(a.Deliveries.Nodes) > 0 {
		start = a.Deliveries.Nodes[0].Cursor // newest first
		for _, d := range a.Deliveries.Nodes {
			row := d.row()
			seen[row.ID] = tailKey(row)
		}
	}
	return &start, nil
}
