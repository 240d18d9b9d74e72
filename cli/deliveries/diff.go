package deliveries

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/termtext"
)

// change is one difference: where, and the value on each side (nil: absent).
type change struct {
	Where string  `json:"where"`
	A     *string `json:"a"`
	B     *string `json:"b"`
}

// diffJSON is `relay deliveries diff -o json`.
type diffJSON struct {
	DeliveryID string   `json:"deliveryId"`
	A          string   `json:"a"` // "original" or the attempt's number
	B          string   `json:"b"`
	Request    []change `json:"request"`
	Response   []change `json:"response"`
	Note       string   `json:"note,omitempty"`
}

func deliveriesDiffCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:   "diff DELIVERY_ID [A [B]]",
		Short: "Compare two attempts of a delivery: what was sent and what came back",
		Long: `Compare two attempts of a delivery: the request each sent (the recorded one, or
an edited retry's) and the response each got — status, headers and body, JSON
bodies compared field by field. A and B are attempt numbers as deliveries show
lists them, or "original" for the request as recorded; by default the last two
attempts. Response bodies are compared only when the Endpoint captures them.`,
		Example: `  relay deliveries diff 0193a7c2-...
  relay deliveries diff 0193a7c2-... 1 3
  relay deliveries diff 0193a7c2-... original 2 -o json`,
		Args: cmdutil.UsageArgs(cobra.RangeArgs(1, 3)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			// The attempts first: the default sides are the last two, and
			// each side is named by its outcome.
			const qa = `query($id: ID!){ delivery(id: $id){ id attempts{ status durationMs error } } }`
			var list struct {
				Delivery *struct {
					ID       string
					Attempts []struct {
						Status, DurationMs *int
						Error              *string
					}
				}
			}
			if err := client.Do(c.Context(), qa, map[string]any{"id": args[0]}, &list); err != nil {
				return fmt.Errorf("diff: %w", err)
			}
			d := list.Delivery
			if d == nil {
				return NotFound(args[0])
			}
			n := len(d.Attempts)
			a, b := strconv.Itoa(n-1), strconv.Itoa(n)
			switch len(args) {
			case 2:
				a = args[1]
			case 3:
				a, b = args[1], args[2]
			}
			switch {
			case n == 0:
				return cmdutil.Usage(fmt.Errorf("delivery %s has no attempts to compare: nothing was forwarded, the relay answered it itself; relay retry %s forwards it to a listener when its Endpoint is in PROXY or QUEUE mode", d.ID, d.ID))
			case len(args) == 1 && n == 1:
				return cmdutil.Usage(fmt.Errorf("delivery %s has 1 attempt: nothing to compare it with yet (relay retry %s makes a second), or compare it with the request as recorded: relay deliveries diff %s original 1", d.ID, d.ID, d.ID))
			}
			name := func(ref string) (string, error) {
				if ref == "original" || ref == "0" {
					return "the request as recorded", nil
				}
				i, err := strconv.Atoi(ref)
				if err != nil || i < 1 || i > n {
					return "", cmdutil.Usage(fmt.Errorf("attempt %q: want original or a number from 1 to %d", ref, n))
				}
				at := d.Attempts[i-1]
				return "attempt " + ref + " (" + describeAttempt(at.Status, at.DurationMs, at.Error) + ")", nil
			}
			nameA, err := name(a)
			if err != nil {
				return err
			}
			nameB, err := name(b)
			if err != nil {
				return err
			}

			// The comparison is the API's (Delivery.compare): this
			// command only prints it.
			const qc = `query($id: ID!, $a: String!, $b: String!){ delivery(id: $id){ compare(a: $a, b: $b){
				request{ where before after } response{ where before after } responseCompared note } } }`
			var res struct {
				Delivery *struct {
					Compare struct {
						Request, Response []apiChange
						ResponseCompared  bool
						Note              *string
					}
				}
			}
			if err := client.Do(c.Context(), qc, map[string]any{"id": d.ID, "a": a, "b": b}, &res); err != nil {
				return fmt.Errorf("diff: %w", err)
			}
			if res.Delivery == nil {
				return NotFound(args[0])
			}
			cmp := res.Delivery.Compare
			r := diffJSON{DeliveryID: d.ID, A: a, B: b, Request: toChanges(cmp.Request), Response: toChanges(cmp.Response), Note: cmdutil.Deref(cmp.Note, "")}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, r)
			}
			fmt.Fprintf(stdout, "comparing %s\n     with %s\n", nameA, nameB)
			printChanges(stdout, "request", r.Request)
			if cmp.ResponseCompared {
				printChanges(stdout, "response", r.Response)
			}
			if r.Note != "" {
				fmt.Fprintf(stdout, "\n(%s)\n", r.Note)
			}
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

// apiChange is a change as the API answers it.
type apiChange struct {
	Where         string
	Before, After *string
}

func toChanges(cs []apiChange) []change {
	out := make([]change, 0, len(cs))
	for _, c := range cs {
		out = append(out, change{Where: c.Where, A: c.Before, B: c.After})
	}
	return out
}

func printChanges(w io.Writer, title string, cs []change) {
	if len(cs) == 0 {
		fmt.Fprintf(w, "\n%s: the same\n", title)
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	show := func(s *string) string {
		if s == nil {
			return "(none)"
		}
		return termtext.Safe(*s, false)
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  %s: %s → %s\n", termtext.Safe(c.Where, false), show(c.A), show(c.B))
	}
}
