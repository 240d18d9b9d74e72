package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/relayhq/relay/domain/duration"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/domain"
)

// endpointJSON is an Endpoint as the commands print it with -o json.
type endpointJSON struct {
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
	Answer     *answerJSON     `json:"answer"`
	Handshakes *handshakesJSON `json:"handshakes"`
	// Filters are the Endpoint's filters in their text form (relay
	// endpoints update --filter).
	Filters []filterJSON `json:"filters"`
	// Retention says how long it keeps its deliveries.
	Retention *retentionJSON `json:"retention"`
	// Queue is a QUEUE Endpoint's queue and policy (null in other modes).
	Queue *endpointQueueJSON `json:"queue,omitempty"`
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

const endpointFields = `id name url mode target responseCapture agentConnected agentCount createdAt filters{ text }
	retention{ window seconds isDefault max deletedBefore } ` + endpointQueueFields + ` ` + answerFields

func endpointsCommand(env func(string) string, stdout io.Writer) *cobra.Command {
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
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(endpointsListCommand(env, stdout), endpointsShowCommand(env, stdout), endpointsCreateCommand(env, stdout),
		endpointsUpdateCommand(env, stdout), endpointsDeleteCommand(env, stdout), endpointsSmeeKeyCommand(env, stdout))
	return cmd
}

// endpointsSmeeKeyCommand issues or revokes an Endpoint's smee stream key.
func endpointsSmeeKeyCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	var revoke bool
	cmd := &cobra.Command{
		Use:   "smee-key ENDPOINT",
		Short: "Give an Endpoint a smee.io-compatible stream URL (a new key, shown once), or revoke it",
		Example: `  relay endpoints smee-key github-app            # prints WEBHOOK_PROXY_URL=…
  relay endpoints smee-key github-app --revoke`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			ep, err := findEndpoint(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			vars := map[string]any{"id": ep.ID}
			if revoke {
				if err := client.Do(c.Context(), `mutation($id: ID!){ revokeSmeeKey(endpointId: $id){ id } }`, vars, nil); err != nil {
					return fmt.Errorf("revoke smee key: %w", err)
				}
				if out.json() {
					return writeJSON(stdout, struct {
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
			if out.json() {
				return writeJSON(stdout, struct {
					ID  string `json:"id"`
					URL string `json:"url"`
				}{ep.ID, res.IssueSmeeKey.URL})
			}
			fmt.Fprintf(stdout, "WEBHOOK_PROXY_URL=%s\nshown once; any earlier key of endpoint %s (%s) no longer works. Revoke with: relay endpoints smee-key %s --revoke\n",
				res.IssueSmeeKey.URL, ep.ID, ep.Name, ep.ID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the key instead: its open streams end")
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	return cmd
}

func endpointsListCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List your Endpoints",
		Example: `  relay endpoints list
  relay endpoints list -o json | jq -r '.[].url'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			eps, err := listEndpoints(c.Context(), client)
			if err != nil {
				return err
			}
			if out.json() {
				return writeJSON(stdout, eps)
			}
			if len(eps) == 0 {
				fmt.Fprintln(stdout, "no endpoints; create one with `relay endpoints create NAME` or `relay listen PORT`")
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tMODE\tTARGET\tAGENTS\tURL\tANSWER\tKEEPS")
			for _, e := range eps {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.ID, e.Name, e.Mode, deref(e.Target, "-"), e.AgentCount, e.URL,
					describeAnswer(e.Answer, e.Handshakes), describeRetention(e.Retention))
			}
			return tw.Flush()
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	return cmd
}

// endpointSettings are the flags of create and update.
type endpointSettings struct {
	name, mode, target string
	capture, noFilters bool
	filters            []string
	retention          string
}

func (s *endpointSettings) flags(cmd *cobra.Command, withName bool) {
	fs := cmd.Flags()
	if withName {
		fs.StringVar(&s.name, "name", "", "new name")
	}
	fs.StringVar(&s.mode, "mode", "", "PROXY (forward through an agent), LOG (record and answer 204) or QUEUE (answer 202 at once, forward later with retries); default PROXY with --target, else LOG")
	fs.StringVar(&s.target, "target", "", "local target for PROXY mode: PORT, localhost:PORT or 127.0.0.1:PORT")
	fs.BoolVar(&s.capture, "response-capture", false, "store the local responses' bodies")
	fs.StringArrayVar(&s.filters, "filter", nil, "forward only deliveries that match (repeatable, all must match; replaces the Endpoint's filters): method=POST, path=/hooks/*, header:NAME=A,B, json:PATH=A,B, event=A,B; others are recorded and answered as LOG")
	if withName {
		fs.BoolVar(&s.noFilters, "no-filters", false, "remove the Endpoint's filters: forward every delivery")
	}
	fs.StringVar(&s.retention, "retention", "", "how long it keeps its deliveries (30d, 12h, 90m), within the relay's bounds; default: the relay's window (relay serve --retention)")
}

// input is the CreateEndpointInput/UpdateEndpointInput of the flags set.
func (s *endpointSettings) input(cmd *cobra.Command) (map[string]any, error) {
	fs := cmd.Flags()
	in := map[string]any{}
	if fs.Changed("name") {
		in["name"] = s.name
	}
	if fs.Changed("target") {
		t, err := endpointTarget(s.target)
		if err != nil {
			return nil, err
		}
		in["target"] = t
	}
	if fs.Changed("mode") {
		m := strings.ToUpper(s.mode)
		if m != "PROXY" && m != "LOG" && m != "QUEUE" {
			return nil, usage(fmt.Errorf("--mode %q: want PROXY, LOG or QUEUE", s.mode))
		}
		in["mode"] = m
	}
	if fs.Changed("response-capture") {
		in["responseCapture"] = s.capture
	}
	if fs.Changed("filter") && s.noFilters {
		return nil, usage(errors.New("--filter and --no-filters exclude each other"))
	}
	if fs.Changed("filter") {
		parsed, err := domain.ParseFilters(s.filters)
		if err != nil {
			return nil, usage(fmt.Errorf("--filter: %w", err))
		}
		in["filters"] = agentcli.FilterInputs(parsed)
	}
	if s.noFilters {
		in["filters"] = []any{}
	}
	if fs.Changed("retention") {
		// Checked here for its form; the relay checks its bounds.
		if r := strings.TrimSpace(s.retention); r != "default" {
			if strings.HasPrefix(r, "-") {
				return nil, usage(fmt.Errorf("--retention %q: must be positive", s.retention))
			}
			d, err := duration.Parse(r)
			if err != nil {
				return nil, usage(fmt.Errorf("--retention: %w", err))
			}
			if d <= 0 {
				return nil, usage(fmt.Errorf("--retention %q: must be positive", s.retention))
			}
		}
		in["retention"] = strings.TrimSpace(s.retention)
	}
	return in, nil
}

// endpointTarget reads a target as the relay stores it: a port alone is
// localhost:PORT.
func endpointTarget(s string) (string, error) {
	if !strings.Contains(s, ":") {
		s = "localhost:" + s
	}
	if err := domain.ValidateTarget(s); err != nil {
		return "", usage(fmt.Errorf("--target: %w", err))
	}
	return s, nil
}

func endpointsCreateCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	var s endpointSettings
	var ans answerFlags
	var qf queueFlags
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an Endpoint and print its public URL",
		Example: `  relay endpoints create stripe --target 3000
  relay endpoints create audit-log --mode LOG`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			in, err := s.input(c)
			if err != nil {
				return err
			}
			if err := ans.input(c, in); err != nil {
				return err
			}
			if err := qf.input(c, in); err != nil {
				return err
			}
			in["name"] = args[0]
			if _, ok := in["mode"]; !ok {
				in["mode"] = "LOG"
				if _, ok := in["target"]; ok {
					in["mode"] = "PROXY"
				}
			}
			var res struct{ CreateEndpoint endpointJSON }
			if err := client.Do(c.Context(), `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpointFields+` } }`, map[string]any{"in": in}, &res); err != nil {
				return fmt.Errorf("create endpoint: %w", err)
			}
			return printEndpoint(stdout, out, "created", res.CreateEndpoint)
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	s.flags(cmd, false)
	ans.flags(cmd, true)
	qf.flags(cmd)
	return cmd
}

func endpointsUpdateCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	var s endpointSettings
	var ans answerFlags
	var qf queueFlags
	cmd := &cobra.Command{
		Use:   "update ENDPOINT",
		Short: "Change an Endpoint's name, mode, target, response capture, own answer or handshakes",
		Example: `  relay endpoints update stripe --mode PROXY --target 3000
  relay endpoints update ep-abc123 --name github
  relay endpoints update audit --answer-status 200 --answer-header Content-Type=application/json --answer-body @ok.json
  relay endpoints update zoom --handshake zoom --zoom-secret-file zoom.secret
  relay endpoints update meta --handshake meta --meta-verify-token "$TOKEN"
  relay endpoints update slack --handshake slack --handshakes-in-proxy RELAY`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			in, err := s.input(c)
			if err != nil {
				return err
			}
			if err := ans.input(c, in); err != nil {
				return err
			}
			if err := qf.input(c, in); err != nil {
				return err
			}
			if len(in) == 0 {
				return usage(errors.New("nothing to change: give --name, --mode, --target, --response-capture, an --answer-… flag, --handshake or a queue flag"))
			}
			ep, err := findEndpoint(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			var res struct{ UpdateEndpoint endpointJSON }
			if err := client.Do(c.Context(), `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ `+endpointFields+` } }`, map[string]any{"id": ep.ID, "in": in}, &res); err != nil {
				return fmt.Errorf("update endpoint: %w", err)
			}
			return printEndpoint(stdout, out, "updated", res.UpdateEndpoint)
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	s.flags(cmd, true)
	ans.flags(cmd, true)
	qf.flags(cmd)
	return cmd
}

func endpointsDeleteCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	cmd := &cobra.Command{
		Use:     "delete ENDPOINT",
		Aliases: []string{"rm"},
		Short:   "Delete an Endpoint (its public URL stops answering)",
		Example: `  relay endpoints delete stripe`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			ep, err := findEndpoint(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			if err := client.Do(c.Context(), `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": ep.ID}, nil); err != nil {
				return fmt.Errorf("delete endpoint: %w", err)
			}
			if out.json() {
				return writeJSON(stdout, struct {
					ID      string `json:"id"`
					Deleted bool   `json:"deleted"`
				}{ep.ID, true})
			}
			fmt.Fprintf(stdout, "deleted endpoint %s (%s)\n", ep.ID, ep.Name)
			return nil
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	return cmd
}

func printEndpoint(w io.Writer, out output, verb string, e endpointJSON) error {
	if out.json() {
		return writeJSON(w, e)
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
	printEndpointQueue(w, e.Queue)
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

func listEndpoints(ctx context.Context, client *apiclient.Client) ([]endpointJSON, error) {
	var res struct{ Endpoints []endpointJSON }
	if err := client.Do(ctx, `{ endpoints{ `+endpointFields+` } }`, nil, &res); err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	if res.Endpoints == nil {
		res.Endpoints = []endpointJSON{}
	}
	return res.Endpoints, nil
}

// findEndpoint finds one of the account's Endpoints by id, else by name;
// none is NOT_FOUND (exit 2), a name several share is a usage error.
func findEndpoint(ctx context.Context, client *apiclient.Client, ref string) (endpointJSON, error) {
	eps, err := listEndpoints(ctx, client)
	if err != nil {
		return endpointJSON{}, err
	}
	return pickEndpoint(eps, ref)
}

func deref(s *string, none string) string {
	if s == nil || *s == "" {
		return none
	}
	return *s
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
	endpointJSON
	Listeners []listenerJSON `json:"listeners"`
}

func endpointsShowCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	cmd := &cobra.Command{
		Use:   "show ENDPOINT",
		Short: "Show an Endpoint, its own answer, handshakes and the listeners serving it",
		Long: `Show an Endpoint (by id or name) and the agent sessions listening on it on
the relay node that answers: which is the primary (its answers go to the
senders) and which receive copies, with their filters.`,
		Example: `  relay endpoints show stripe
  relay endpoints show stripe -o json | jq '.listeners[] | select(.primary)'`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			e, err := findEndpoint(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			var res struct {
				Endpoint *endpointShowJSON
			}
			q := `query($id: ID!){ endpoint(id: $id){ ` + endpointFields + ` listeners{ agentId target primary connectedAt node filters{ text } } } }`
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
			if out.json() {
				return writeJSON(stdout, show)
			}
			if err := printEndpoint(stdout, out, "", show.endpointJSON); err != nil {
				return err
			}
			printAnswers(stdout, show.Answer, show.Handshakes)
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.AgentID, role, l.Target, localTime(l.ConnectedAt), l.Node, filters)
			}
			return tw.Flush()
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	return cmd
}
