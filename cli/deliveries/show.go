package deliveries

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/curl"
	"github.com/relayhq/relay/deliveryjson"
	"github.com/relayhq/relay/internal/termtext"
)

// deliveryJSON is `deliveries show -o json`: the recorded request, its
// attempts, the address's public URL and the curl command replaying it.
type deliveryJSON struct {
	ID             string                 `json:"id"`
	Address        string                 `json:"address"`
	URL            string                 `json:"url"`
	Method         string                 `json:"method"`
	Path           string                 `json:"path"`
	PathBase64     *string                `json:"pathBase64"`
	Headers        []deliveryjson.Header  `json:"headers"`
	BodyBase64     string                 `json:"bodyBase64"`
	BodySize       int                    `json:"bodySize"`
	Complete       bool                   `json:"complete"`
	BodyUnread     bool                   `json:"bodyUnread"`  // refused (413) before its end
	StoredBytes    int                    `json:"storedBytes"` // bytes of the body stored
	ReceivedAt     string                 `json:"receivedAt"`
	ResponseStatus *int                   `json:"responseStatus"`
	Attempts       []deliveryjson.Attempt `json:"attempts"`
	Provider       *providerJSON          `json:"provider"`
	Duplicates     int                    `json:"duplicates"`
	// ResponseNotCaptured says why the latest answer's body is not stored
	// although the Endpoint captures responses.
	ResponseNotCaptured *string `json:"responseNotCaptured"`
	// Why says in one sentence why the sender got responseStatus
	// (`deliveries explain` prints the facts behind it).
	Why string `json:"why"`
	// Curl replays the request byte for byte; it is empty when the body is
	// stored in part, and CurlWithheld says why.
	Curl         string `json:"curl"`
	CurlWithheld string `json:"curlWithheld,omitempty"`
}

const deliveryFields = `id address method path pathBase64 headers{ name value valueBase64 } bodyBase64 bodySize complete bodyUnread receivedAt responseStatus responseNotCaptured attempts{ ` + deliveryjson.AttemptFields + ` } provider{ name eventType deliveryId } duplicates`

func deliveriesShowCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var body bool
	cmd := &cobra.Command{
		Use:        "show DELIVERY_ID",
		SuggestFor: []string{"get", "view"},
		Short:      "Show a delivery's request, attempts, and a curl command that replays it",
		Example: `  relay deliveries show 0193a7c2-...
  relay deliveries show 0193a7c2-... --body
  relay deliveries show 0193a7c2-... -o json | jq -r .curl | sh`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			client := conn.Client(conn.Token)
			d, err := showDelivery(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, d)
			}
			printDelivery(stdout, d, body)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().BoolVar(&body, "body", false, "print the body too")
	return cmd
}

func showDelivery(ctx context.Context, client *apiclient.Client, id string) (deliveryJSON, error) {
	var res struct {
		Delivery *struct {
			deliveryJSON
			// The API's why is an object; show prints its summary. Being
			// shallower, this field takes "why" from deliveryJSON's.
			APIWhy struct{ Summary string } `json:"why"`
		}
	}
	if err := client.Do(ctx, `query($id: ID!){ delivery(id: $id){ `+deliveryFields+` why{ summary } } }`, map[string]any{"id": id}, &res); err != nil {
		return deliveryJSON{}, fmt.Errorf("show delivery: %w", err)
	}
	if res.Delivery == nil {
		return deliveryJSON{}, noDelivery(id)
	}
	d := res.Delivery.deliveryJSON
	d.Why = res.Delivery.APIWhy.Summary
	if d.Headers == nil {
		d.Headers = []deliveryjson.Header{}
	}
	if d.Attempts == nil {
		d.Attempts = []deliveryjson.Attempt{}
	}
	url, err := addressURL(ctx, client, d.Address)
	if err != nil {
		return deliveryJSON{}, fmt.Errorf("show delivery: address %s: %w", d.Address, err)
	}
	d.URL = url
	path := deliveryjson.ExactText(d.Path, d.PathBase64)
	headers := make([]curl.Header, 0, len(d.Headers))
	for _, h := range d.Headers {
		headers = append(headers, curl.Header{Name: h.Name, Value: deliveryjson.ExactText(h.Value, h.ValueBase64)})
	}
	d.StoredBytes = base64.StdEncoding.DecodedLen(len(d.BodyBase64)) - strings.Count(d.BodyBase64, "=")
	if !d.Complete {
		// A replay of part of the body is not the request the sender made,
		// and a provider's signature over it would not verify.
		d.CurlWithheld = "the body is " + storedText(d) + ": a replay would not send the request as it arrived"
		return d, nil
	}
	d.Curl = curl.Command(d.Method, url, path, headers, d.BodyBase64, d.BodySize)
	return d, nil
}

// storedText says how much of an incomplete body is stored, and why.
func storedText(d deliveryJSON) string {
	return deliveryjson.StoredText(d.StoredBytes, d.BodySize, d.BodyUnread)
}

func printDelivery(w io.Writer, d deliveryJSON, body bool) {
	fmt.Fprintf(w, "delivery %s to %s, received %s, answered %s\n", d.ID, d.Address, cmdutil.LocalTime(d.ReceivedAt), statusText(d.ResponseStatus))
	if d.Provider != nil {
		line := "provider: " + eventText(d.Provider, d.Duplicates)
		if d.Provider.DeliveryID != nil {
			line += ", its delivery id " + termtext.Safe(*d.Provider.DeliveryID, false)
		}
		if d.Duplicates > 0 {
			line += " (relay deliveries list " + d.Address + " --provider-id ID lists them all)"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "why: %s\n\n", termtext.Safe(d.Why, false))
	// The sender's bytes are escaped where they could drive the terminal.
	fmt.Fprintf(w, "%s %s\n", d.Method, termtext.Safe(d.Path, false))
	for _, h := range d.Headers {
		fmt.Fprintf(w, "%s: %s\n", termtext.Safe(h.Name, false), termtext.Safe(h.Value, false))
	}
	if !d.Complete {
		fmt.Fprintf(w, "\nbody: %s\n", storedText(d))
	}
	if body {
		b, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
		switch {
		case len(b) == 0:
		case utf8.Valid(b):
			fmt.Fprintf(w, "\n%s\n", termtext.Safe(string(b), true))
		default:
			fmt.Fprintf(w, "\n(%d bytes, not UTF-8: see bodyBase64 in -o json)\n", len(b))
		}
	} else if d.BodySize > 0 {
		fmt.Fprintf(w, "\n(%d bytes of body; --body prints it)\n", d.BodySize)
	}
	if len(d.Attempts) > 0 {
		fmt.Fprintln(w, "\nattempts:")
		for i, a := range d.Attempts {
			line := describeAttempt(a.Status, a.DurationMs, a.Error)
			if a.Late {
				line += " (late: the sender had already been answered by the relay)"
			}
			line += queueLabel(a)
			if a.Role == "COPY" {
				line += " (copy for listener " + termtext.Safe(cmdutil.Deref(a.AgentID, "?"), false) + ")"
			}
			if a.Signature != nil {
				line += "  signature " + termtext.Safe(*a.Signature, false)
			}
			line += "  fidelity " + a.Fidelity.String()
			fmt.Fprintf(w, "  %d: %s%s\n", i+1, line, describeEdit(a.Edit))
		}
	}
	if d.ResponseNotCaptured != nil {
		fmt.Fprintf(w, "\nresponse body not stored: %s\n", termtext.Safe(*d.ResponseNotCaptured, false))
	}
	switch {
	case d.CurlWithheld != "":
		fmt.Fprintf(w, "\nno replay command: %s\n", d.CurlWithheld)
	case termtext.HasControl(d.Curl):
		// Escaped, it would no longer replay the bytes; raw, it would
		// reach the terminal.
		fmt.Fprintln(w, "\nreplay with: the request holds control characters; the curl command is in -o json")
	case !body && d.BodySize > 0:
		// The command carries the body in base64: long, and only useful
		// to copy whole.
		fmt.Fprintf(w, "\nreplay with: relay deliveries show %s --body (the curl command, with the body), or -o json | jq -r .curl\n", d.ID)
	default:
		fmt.Fprintf(w, "\nreplay with:\n%s\n", d.Curl)
	}
}

// queueLabel says that the queue sent an attempt of a QUEUE Endpoint (its
// attempts are retries to the API, but no user asked for them), and that
// it may be a duplicate when it was sent again after one was left open.
func queueLabel(a deliveryjson.Attempt) string {
	switch {
	case a.Queued && a.PossibleDuplicate:
		return " (from the queue, a possible duplicate: an earlier attempt was left open)"
	case a.Queued:
		return " (from the queue)"
	}
	return ""
}
