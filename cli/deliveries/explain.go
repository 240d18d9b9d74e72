package deliveries

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/termtext"
)

// explanationJSON is `deliveries explain -o json`: why the sender got
// status, in one sentence and the dated facts of the log behind it.
type explanationJSON struct {
	ID      string     `json:"id"`
	Status  *int       `json:"status"`
	Summary string     `json:"summary"`
	Facts   []factJSON `json:"facts"`
	// Sender is what the sender's connection received (null while it
	// waits, or when it got none: senderLost); Shown where status comes
	// from (a retry's, which the sender never saw, after a retry).
	Sender     *senderAnswerJSON `json:"sender"`
	SenderLost bool              `json:"senderLost"`
	Shown      *shownStatusJSON  `json:"shown"`
}

type senderAnswerJSON struct {
	Status  int    `json:"status"`
	Attempt *int   `json:"attempt"` // null: the relay answered itself
	At      string `json:"at"`
}

type shownStatusJSON struct {
	Status  int    `json:"status"`
	Attempt *int   `json:"attempt"` // null: the relay's own answer
	Kind    string `json:"kind"`    // RELAY, FORWARD, RETRY, EDITED_RETRY
}

type factJSON struct {
	At   string `json:"at"`
	Text string `json:"text"`
}

func deliveriesExplainCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:   "explain DELIVERY_ID",
		Short: "Say why a delivery's sender got the status it got, with the facts from the log",
		Long: `Say why a delivery's sender got the status it got: who answered (the relay
itself, or your local process through an agent), what decided it and when,
then the dated facts from the log behind it (the request, the relay's own
answer, each attempt and its outcome, the agent sessions that decided it).`,
		Example: `  relay deliveries explain 0193a7c2-...
  relay deliveries explain 0193a7c2-... -o json | jq -r .summary`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			x, err := explainDelivery(c.Context(), conn.Client(conn.Token), args[0])
			if err != nil {
				return err
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, x)
			}
			printExplanation(stdout, x)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func explainDelivery(ctx context.Context, client *apiclient.Client, id string) (explanationJSON, error) {
	var res struct {
		Delivery *struct {
			ID  string
			Why struct {
				Status     *int
				Summary    string
				Facts      []factJSON
				Sender     *senderAnswerJSON
				SenderLost bool
				Shown      *shownStatusJSON
			}
		}
	}
	q := `query($id: ID!){ delivery(id: $id){ id why{ status summary facts{ at text }
		sender{ status attempt at } senderLost shown{ status attempt kind } } } }`
	if err := client.Do(ctx, q, map[string]any{"id": id}, &res); err != nil {
		return explanationJSON{}, fmt.Errorf("explain delivery: %w", err)
	}
	if res.Delivery == nil {
		return explanationJSON{}, noDelivery(id)
	}
	w := res.Delivery.Why
	x := explanationJSON{ID: res.Delivery.ID, Status: w.Status, Summary: w.Summary, Facts: w.Facts,
		Sender: w.Sender, SenderLost: w.SenderLost, Shown: w.Shown}
	if x.Facts == nil {
		x.Facts = []factJSON{}
	}
	return x, nil
}

// printExplanation prints the sentence, then each fact after its time.
// The facts quote agents' errors and recorded reasons: they are escaped
// like a sender's bytes.
func printExplanation(w io.Writer, x explanationJSON) {
	fmt.Fprintln(w, termtext.Safe(x.Summary, false))
	if len(x.Facts) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, f := range x.Facts {
		fmt.Fprintf(w, "%s  %s\n", cmdutil.LocalTime(f.At), termtext.Safe(f.Text, false))
	}
}
