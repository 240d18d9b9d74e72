package deliveries

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/deliveryjson"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/termtext"
)

// retryJSON is `relay retry -o json`: the new attempt and every attempt.
type retryJSON struct {
	DeliveryID     string                 `json:"deliveryId"`
	ResponseStatus *int                   `json:"responseStatus"`
	Attempt        *deliveryjson.Attempt  `json:"attempt"` // the new one
	Attempts       []deliveryjson.Attempt `json:"attempts"`
}

// errNot2xx is a retry whose new attempt was not answered 2xx (exit 1).
var errNot2xx = errors.New("retry: the new attempt was not answered 2xx")

// RetryCommand is `relay retry`.
func RetryCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var ef editFlags
	var all, refusedOffline, dead bool
	catch := defaultCatchUp
	cmd := &cobra.Command{
		Use: "retry DELIVERY_ID | --all --refused-offline ENDPOINT | --all --dead ENDPOINT",
		// Stripe CLI's events resend, other tools' redeliver and replay
		// (relay deliveries replay; relay replay is the bundle's).
		SuggestFor: []string{"resend", "redeliver", "replay"},
		Short:      "Replay a stored delivery to its Endpoint's local target, as recorded or edited",
		Long: `Replay a stored delivery to its Endpoint's local target (through the
connected agent) and print the new attempt. Exits 1 when the new attempt was
not answered 2xx, 2 when the relay refuses the retry (unknown id, bad token,
no agent connected, a bad edit).

The edit flags send a changed copy: the attempt records exactly what changed,
and the recorded delivery stays as it was (relay deliveries show lists the
attempt's edit).

--all --refused-offline ENDPOINT catches up after the agent was away: it
retries every delivery the relay answered 503 because no agent was
connected, oldest first, at most --concurrency at once and --rate per
second, printing a line each. Interrupt it at any time: a delivery that
reached the local target no longer counts as refused, so running it again
sends only the rest.`,
		Example: `  relay retry 0193a7c2-...
  relay retry 0193a7c2-... -o json | jq .attempt.status
  relay retry 0193a7c2-... --set-header X-Debug=1 --unset-header Stripe-Signature
  relay retry 0193a7c2-... --body @fixed.json --path /webhooks/v2
  relay retry --all --refused-offline stripe
  relay retry --all --dead orders`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			edit, err := ef.edit()
			if err != nil {
				return err
			}
			if dead {
				if !all || refusedOffline || edit != nil {
					return cmdutil.Usage(errDeadWithAll)
				}
				client, err := conn.Start(c, env, out)
				if err != nil {
					return err
				}
				return redriveDead(c.Context(), client, args[0], stdout)
			}
			if all || refusedOffline {
				switch {
				case !all || !refusedOffline:
					return cmdutil.Usage(errors.New("--all takes --refused-offline (the deliveries refused while no agent was connected), and only with --all"))
				case edit != nil:
					return cmdutil.Usage(errors.New("--all sends the deliveries as recorded: give no edit flags"))
				case out.JSON():
					return cmdutil.Usage(errors.New("--all prints a line per delivery: no -o json"))
				}
				if err := catch.check(); err != nil {
					return err
				}
				client, err := conn.Start(c, env, out)
				if err != nil {
					return err
				}
				return catchUp(c.Context(), client, args[0], catch, stdout)
			}
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			const q = `mutation($id: ID!, $edit: RequestEditInput){ retryDelivery(id: $id, edit: $edit){ id responseStatus attempts{ ` + deliveryjson.AttemptFields + ` } } }`
			var res struct {
				RetryDelivery struct {
					ID             string
					ResponseStatus *int
					Attempts       []deliveryjson.Attempt
				}
			}
			vars := map[string]any{"id": args[0]}
			if edit != nil {
				vars["edit"] = edit
			}
			if err := client.Do(c.Context(), q, vars, &res); err != nil {
				if ae := (*apiclient.Error)(nil); errors.As(err, &ae) {
					switch ae.Code {
					case "NOT_FOUND":
						err = noDelivery(args[0])
					case "AGENT_NOT_CONNECTED":
						hinted := *ae
						hinted.Message += "; a retry goes through a listener: start relay listen PORT ENDPOINT, then retry"
						err = &hinted
					case "RETRY_NOT_PROXY":
						hinted := *ae
						hinted.Message += " or QUEUE mode, whose deliveries go to a listener (relay endpoints update ENDPOINT --mode proxy --target PORT); " +
							"an inspector's are sent again by the curl command relay deliveries show " + args[0] + " --body prints"
						err = &hinted
					}
				}
				return fmt.Errorf("retry: %w", err)
			}
			d := res.RetryDelivery
			r := retryJSON{DeliveryID: d.ID, ResponseStatus: d.ResponseStatus, Attempts: d.Attempts}
			if r.Attempts == nil {
				r.Attempts = []deliveryjson.Attempt{}
			}
			if n := len(d.Attempts); n > 0 {
				r.Attempt = &d.Attempts[n-1]
			}
			if out.JSON() {
				if err := cmdutil.WriteJSON(stdout, r); err != nil {
					return err
				}
			} else {
				for i, a := range d.Attempts {
					fmt.Fprintf(stdout, "attempt %d: %s%s%s\n", i+1, describeAttempt(a.Status, a.DurationMs, a.Error), queueLabel(a), describeEdit(a.Edit))
				}
			}
			if a := r.Attempt; a == nil || a.Status == nil || *a.Status < 200 || *a.Status > 299 {
				return errNot2xx
			}
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&ef.method, "method", "", "send with this method instead")
	fs.StringVar(&ef.path, "path", "", "send to this path (and query) instead, starting with /")
	fs.StringArrayVar(&ef.set, "set-header", nil, "set a header: NAME=VALUE (replaces every value of NAME; repeat for several)")
	fs.StringArrayVar(&ef.unset, "unset-header", nil, "remove every value of a header (repeatable)")
	fs.StringVar(&ef.body, "body", "", "send this body instead: text, @FILE, or @- for standard input")
	fs.BoolVar(&all, "all", false, "retry every delivery of ENDPOINT that matches the filter (--refused-offline)")
	fs.BoolVar(&dead, "dead", false, "with --all: put a QUEUE Endpoint's dead deliveries back in its queue (docs/queue.md)")
	fs.BoolVar(&refusedOffline, "refused-offline", false, "with --all: the deliveries answered 503 because no agent was connected")
	fs.IntVar(&catch.concurrency, "concurrency", catch.concurrency, "with --all: retries at once")
	fs.Float64Var(&catch.perSecond, "rate", catch.perSecond, "with --all: retries started per second")
	fs.IntVar(&catch.limit, "limit", catch.limit, "with --all: at most this many deliveries")
	return cmd
}

// editFlags are retry's edit flags as typed.
type editFlags struct {
	method, path, body string
	set, unset         []string
}

// maxEditBody bounds a body read from a file (or standard input): a
// relay refuses an edited body over its --max-body, which is at most
// evidence.MaxEventBody (16 MiB), so reading more would only be refused
// there, after base64 and JSON had taken three times as much here.
const maxEditBody = evidence.MaxEventBody

// edit is the RequestEditInput the flags ask for, nil for none.
func (f editFlags) edit() (map[string]any, error) {
	e := map[string]any{}
	if f.method != "" {
		e["method"] = strings.ToUpper(f.method)
	}
	if f.path != "" {
		e["path"] = f.path
	}
	var set []map[string]any
	for _, h := range f.set {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return nil, cmdutil.Usage(fmt.Errorf("--set-header %q: want NAME=VALUE", h))
		}
		set = append(set, map[string]any{"name": name, "value": value})
	}
	if set != nil {
		e["setHeaders"] = set
	}
	if len(f.unset) > 0 {
		e["unsetHeaders"] = f.unset
	}
	if f.body != "" {
		b := []byte(f.body)
		if name, ok := strings.CutPrefix(f.body, "@"); ok {
			var r io.Reader
			if name == "-" {
				r = os.Stdin
			} else {
				file, err := os.Open(name)
				if err != nil {
					return nil, cmdutil.Usage(fmt.Errorf("--body: %w", err))
				}
				defer file.Close()
				r = file
			}
			var err error
			if b, err = io.ReadAll(io.LimitReader(r, maxEditBody+1)); err != nil {
				return nil, fmt.Errorf("--body: %w", err)
			}
			if len(b) > maxEditBody {
				return nil, cmdutil.Usage(fmt.Errorf("--body %s: over %d MiB (a relay takes a body of at most its --max-body, at most %d MiB)", f.body, maxEditBody>>20, maxEditBody>>20))
			}
		}
		e["bodyBase64"] = base64.StdEncoding.EncodeToString(b)
	}
	if len(e) == 0 {
		return nil, nil
	}
	return e, nil
}

// describeEdit is an attempt's edit in a few words, "" for none.
func describeEdit(e *deliveryjson.Edit) string {
	if e == nil {
		return ""
	}
	var parts []string
	if e.Method != nil {
		parts = append(parts, "method "+*e.Method)
	}
	if e.Path != nil {
		parts = append(parts, "path "+termtext.Safe(*e.Path, false))
	}
	for _, h := range e.SetHeaders {
		parts = append(parts, "set "+termtext.Safe(h.Name, false))
	}
	for _, n := range e.UnsetHeaders {
		parts = append(parts, "unset "+termtext.Safe(n, false))
	}
	if e.BodyBase64 != nil {
		b, _ := base64.StdEncoding.DecodeString(*e.BodyBase64)
		parts = append(parts, fmt.Sprintf("body (%d bytes)", len(b)))
	}
	return "  edited: " + strings.Join(parts, ", ")
}

func describeAttempt(status, ms *int, errText *string) string {
	s := "pending"
	if status != nil {
		s = fmt.Sprint(*status)
	}
	if ms != nil {
		s += fmt.Sprintf(" (%d ms)", *ms)
	}
	if errText != nil && *errText != "" {
		s += " " + *errText
	}
	return s
}
