// Package endpoints is `relay endpoints`, and the Endpoint look-ups and
// answer flags other commands use (listen, inspector, deliveries).
package endpoints

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
)

// Endpoint is an Endpoint as the commands print it with -o json.
type Endpoint struct {
	ID              string  `json:"id"`
	Name            string  `json:"name"`
	URL             string  `json:"url"`
	Mode            string  `json:"mode"`
	Target          *string `json:"target"`
	ResponseCapture bool    `json:"responseCapture"`
	AgentConnected  bool    `json:"agentConnected"`
	AgentCount      int     `json:"agentCount"`
	CreatedAt       string  `json:"createdAt"`
	// Answer is what it answers in LOG mode; Handshakes the providers'
	// verification requests it answers itself (secrets masked).
	Answer     *AnswerJSON     `json:"answer"`
	Handshakes *HandshakesJSON `json:"handshakes"`
	// Filters are the Endpoint's filters in their text form (relay
	// endpoints update --filter).
	Filters []filterJSON `json:"filters"`
	// Retention says how long it keeps its deliveries.
	Retention *retentionJSON `json:"retention"`
	// Queue is a QUEUE Endpoint's queue and policy (null in other modes).
	Queue *queueJSON `json:"queue,omitempty"`
}

// retentionJSON is an Endpoint's retention window as the commands print it.
type retentionJSON struct {
	Window        string  `json:"window"`
	Seconds       int64   `json:"seconds"`
	IsDefault     bool    `json:"isDefault"`
	Max           string  `json:"max"`
	DeletedBefore *string `json:"deletedBefore"`
}

// describeRetention is a window as list and show print it.
func describeRetention(r *retentionJSON) string {
	if r == nil {
		return "-"
	}
	if r.IsDefault {
		return r.Window + " (default)"
	}
	return r.Window
}

// filterJSON is a filter as the commands print it.
type filterJSON struct {
	Text string `json:"text"`
}

const Fields = `id name url mode target responseCapture agentConnected agentCount createdAt filters{ text }
	retention{ window seconds isDefault max deletedBefore } ` + queueFields + ` ` + AnswerFields

// Command is `relay endpoints`.
func Command(env func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "endpoints",
		Aliases: []string{"endpoint"},
		Short:   "List, create, update and delete Endpoints",
		Example: `  relay endpoints list
  relay endpoints show stripe
  relay endpoints create stripe --target 3000
  relay endpoints update stripe --mode LOG
  relay endpoints update slack --handshake slack
  relay endpoints update stripe --retention 7d
  relay endpoints delete stripe
  relay endpoints smee-key github-app`,
	}
	cmd.AddCommand(endpointsListCommand(env, stdout), endpointsShowCommand(env, stdout), endpointsCreateCommand(env, stdout),
		endpointsUpdateCommand(env, stdout), endpointsDeleteCommand(env, stdout), endpointsSmeeKeyCommand(env, stdout))
	return cmd
}

// endpointsSmeeKeyCommand issues or revokes an Endpoint's smee stream key.
func endpointsSmeeKeyCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var revoke bool
	cmd := &cobra.Command{
		Use:   "smee-key ENDPOINT",
		Short: "Give an Endpoint a smee.io-compatible stream URL (a new key, shown once), or revoke it",
		Example: `  relay endpoints smee-key github-app            # prints WEBHOOK_PROXY_URL=…
  relay endpoints smee-key github-app --revoke`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			ep, err := Find(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			vars := map[string]any{"id": ep.ID}
			if revoke {
				if err := client.Do(c.Context(), `mutation($id: ID!){ revokeSmeeKey(endpointId: $id){ id } }`, vars, nil); err != nil {
					return fmt.Errorf("revoke smee key: %w", err)
				}
				if out.JSON() {
					return cmdutil.WriteJSON(stdout, struct {
						ID      string `json:"id"`
						Revoked bool   `json:"revoked"`
					}{ep.ID, true})
				}
				fmt.Fprintf(stdout, "revoked the smee key of endpoint %s (%s): its streams end\n", ep.ID, ep.Name)
				return nil
			}
			var res struct{ IssueSmeeKey struct{ URL string } }
			if err := client.Do(c.Context(), `mutation($id: ID!){ issueSmeeKey(endpointId: $id){ url } }`, vars, &res); err != nil {
				return fmt.Errorf("issue smee key: %w", err)
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, struct {
					ID  string `json:"id"`
					URL string `json:"url"`
				}{ep.ID, res.IssueSmeeKey.URL})
			}
			fmt.Fprintf(stdout, "WEBHOOK_PROXY_URL=%s\nshown once; any earlier key of endpoint %s (%s) no longer works. Revoke with: relay endpoints smee-key %s --revoke\n",
				res.IssueSmeeKey.URL, ep.ID, ep.Name, ep.ID)
			fmt.Fprint(stdout, cmdutil.SmeeLocalhostNote(res.IssueSmeeKey.URL))
			return nil
		},
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the key instead: its open streams end")
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func endpointsListCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your Endpoints",
		Example: `  relay endpoints list
  relay endpoints list -o json | jq -r '.[].url'`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			eps, err := List(c.Context(), client)
			if err != nil {
				return err
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, eps)
			}
			if len(eps) == 0 {
				fmt.Fprintln(stdout, "no endpoints; create one with `relay endpoints create NAME` or `relay listen PORT`")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tMODE\tTARGET\tAGENTS\tURL\tANSWER\tKEEPS")
			for _, e := range eps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.ID, e.Name, e.Mode, cmdutil.Deref(e.Target, "-"), e.AgentCount, e.URL,
					describeAnswer(e.Mode, e.Answer, e.Handshakes), describeRetention(e.Retention))
			}
			return tw.Flush()
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

func printEndpoint(w io.Writer, out cmdutil.Output, verb string, e Endpoint) error {
	if out.JSON() {
		return cmdutil.WriteJSON(w, e)
	}
	// verb is what just happened ("created"); `show` has none and prints
	// the line as "endpoint ...".
	if verb != "" {
		fmt.Fprint(w, verb+" ")
	}
	fmt.Fprintf(w, "endpoint %s (%s), %s mode", e.ID, e.Name, e.Mode)
	if e.Target != nil && *e.Target != "" {
		fmt.Fprintf(w, " → %s", *e.Target)
	}
	fmt.Fprintf(w, "\n%s\n", e.URL)
	printQueue(w, e.Queue)
	if r := e.Retention; r != nil {
		fmt.Fprintf(w, "keeps deliveries %s", describeRetention(r))
		if r.DeletedBefore != nil {
			fmt.Fprintf(w, "; deleted those received before %s", *r.DeletedBefore)
		}
		fmt.Fprintln(w)
	}
	if len(e.Filters) > 0 {
		var fs []string
		for _, f := range e.Filters {
			fs = append(fs, f.Text)
		}
		fmt.Fprintf(w, "filters: %s (other deliveries are recorded and answered as LOG)\n", strings.Join(fs, " "))
	}
	return nil
}

// List is the account's Endpoints, all of them, page by page
// (apiclient.Endpoints).
func List(ctx context.Context, client *apiclient.Client) ([]Endpoint, error) {
	eps, err := apiclient.Endpoints(ctx, client, Fields, func(e Endpoint) string { return e.ID })
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	return eps, nil
}

// Find finds one of the account's Endpoints by id, else by name;
// none is NOT_FOUND (exit 2), a name several share is a usage error.
func Find(ctx context.Context, client *apiclient.Client, ref string) (Endpoint, error) {
	eps, err := List(ctx, client)
	if err != nil {
		return Endpoint{}, err
	}
	return Pick(eps, ref)
}

// listenerJSON is a session listening on an Endpoint, as `relay endpoints
// show -o json` prints it.
type listenerJSON struct {
	AgentID     string `json:"agentId"`
	Target      string `json:"target"`
	Primary     bool   `json:"primary"`
	ConnectedAt string `json:"connectedAt"`
	Node        string `json:"node"`
	Filters     []struct {
		Text string `json:"text"`
	} `json:"filters"`
}

// endpointShowJSON is `relay endpoints show -o json`.
type endpointShowJSON struct {
	Endpoint
	Listeners []listenerJSON `json:"listeners"`
}

func endpointsShowCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:   "show ENDPOINT",
		Short: "Show an Endpoint, its own answer, handshakes and the listeners serving it",
		Long: `Show an Endpoint (by id or name) and the agent sessions listening on it on
the relay node that answers: which is the primary (its answers go to the
senders) and which receive copies, with their filters.`,
		Example: `  relay endpoints show stripe
  relay endpoints show stripe -o json | jq '.listeners[] | select(.primary)'`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			e, err := Find(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			var res struct {
				Endpoint *endpointShowJSON
			}
			q := `query($id: ID!){ endpoint(id: $id){ ` + Fields + ` listeners{ agentId target primary connectedAt node filters{ text } } } }`
			if err := client.Do(c.Context(), q, map[string]any{"id": e.ID}, &res); err != nil {
				return fmt.Errorf("show endpoint %s: %w", e.ID, err)
			}
			if res.Endpoint == nil {
				return &apiclient.Error{Message: fmt.Sprintf("no endpoint %q for this token", args[0]), Code: "NOT_FOUND"}
			}
			show := *res.Endpoint
			if show.Listeners == nil {
				show.Listeners = []listenerJSON{}
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, show)
			}
			if err := printEndpoint(stdout, out, "", show.Endpoint); err != nil {
				return err
			}
			PrintAnswers(stdout, show.Mode, show.Answer, show.Handshakes)
			if len(show.Listeners) == 0 {
				fmt.Fprintln(stdout, "no listeners: start one with `relay listen PORT "+show.Name+"`")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "LISTENER\tROLE\tTARGET\tCONNECTED\tNODE\tFILTERS")
			for _, l := range show.Listeners {
				role := "copy"
				if l.Primary {
					role = "primary"
				}
				var fs []string
				for _, f := range l.Filters {
					fs = append(fs, f.Text)
				}
				filters := strings.Join(fs, " ")
				if filters == "" {
					filters = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.AgentID, role, l.Target, cmdutil.LocalTime(l.ConnectedAt), l.Node, filters)
			}
			return tw.Flush()
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

// Pick finds an Endpoint by id, else by name, among eps.
func Pick(eps []Endpoint, ref string) (Endpoint, error) {
	var byName []Endpoint
	for _, e := range eps {
		if e.ID == ref {
			return e, nil
		}
		if e.Name == ref {
			byName = append(byName, e)
		}
	}
	switch len(byName) {
	case 1:
		return byName[0], nil
	case 0:
		return Endpoint{}, &apiclient.Error{Message: fmt.Sprintf("no endpoint %q for this token%s (see relay endpoints list)", ref, DidYouMean(eps, ref)), Code: "NOT_FOUND"}
	}
	return Endpoint{}, cmdutil.Usage(fmt.Errorf("%d endpoints are named %q: give the id (see relay endpoints list)", len(byName), ref))
}

// DidYouMean names the Endpoints of eps whose name is ref mistyped (at
// most two letters added, dropped or changed, or ref the start of it), as
// "; did you mean \"stripe\"?" for a refusal, or "" when none is.
func DidYouMean(eps []Endpoint, ref string) string {
	var close []string
	for _, e := range eps {
		if e.Name != ref && !slices.Contains(close, strconv.Quote(e.Name)) &&
			(editDistance(strings.ToLower(ref), strings.ToLower(e.Name)) <= 2 || strings.HasPrefix(e.Name, ref)) {
			close = append(close, strconv.Quote(e.Name))
		}
	}
	if len(close) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(close, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b, in bytes (names
// are short: its cost is len(a)×len(b)).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
