package endpoints

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
)

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
			return nil, cmdutil.Usage(fmt.Errorf("--mode %q: want PROXY, LOG or QUEUE", s.mode))
		}
		in["mode"] = m
	}
	if fs.Changed("response-capture") {
		in["responseCapture"] = s.capture
	}
	if fs.Changed("filter") && s.noFilters {
		return nil, cmdutil.Usage(errors.New("--filter and --no-filters exclude each other"))
	}
	if fs.Changed("filter") {
		for _, t := range s.filters {
			if strings.TrimSpace(t) != "" {
				continue
			}
			if fs.Lookup("no-filters") != nil {
				return nil, cmdutil.Usage(fmt.Errorf("--filter %q is empty: --no-filters removes the Endpoint's filters", t))
			}
			return nil, cmdutil.Usage(fmt.Errorf("--filter %q is empty: give no --filter for an Endpoint that forwards every delivery", t))
		}
		parsed, err := domain.ParseFilters(s.filters)
		if err != nil {
			return nil, cmdutil.Usage(fmt.Errorf("--filter: %w", err))
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
				return nil, cmdutil.Usage(fmt.Errorf("--retention %q: must be positive", s.retention))
			}
			d, err := duration.Parse(r)
			if err != nil {
				return nil, cmdutil.Usage(fmt.Errorf("--retention: %w", err))
			}
			if d <= 0 {
				return nil, cmdutil.Usage(fmt.Errorf("--retention %q: must be positive", s.retention))
			}
		}
		in["retention"] = strings.TrimSpace(s.retention)
	}
	return in, nil
}

// endpointTarget reads a target as the relay stores it: a port alone is
// localhost:PORT.
func endpointTarget(in string) (string, error) {
	s := in
	if !strings.Contains(s, ":") {
		s = "localhost:" + s
	}
	if domain.ValidateTarget(s) != nil {
		// The domain's reason speaks of the host:port made of in, which
		// is not what the user typed ("abc" read as localhost:abc).
		return "", cmdutil.Usage(fmt.Errorf("--target %q: want a port (3000), localhost:PORT or 127.0.0.1:PORT", in))
	}
	return s, nil
}

func endpointsCreateCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var s endpointSettings
	var ans AnswerFlags
	var qf queueFlags
	cmd := &cobra.Command{
		Use:        "create NAME",
		SuggestFor: []string{"new", "add"},
		Short:      "Create an Endpoint and print its public URL",
		Example: `  relay endpoints create stripe --target 3000
  relay endpoints create audit-log --mode LOG`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			in, err := s.input(c)
			if err != nil {
				return err
			}
			if err := ans.Input(c, in); err != nil {
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
			var res struct{ CreateEndpoint Endpoint }
			if err := client.Do(c.Context(), `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+Fields+` } }`, map[string]any{"in": in}, &res); err != nil {
				return fmt.Errorf("create endpoint: %w", withTargetFlag(err))
			}
			return printEndpoint(stdout, out, "created", res.CreateEndpoint)
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	s.flags(cmd, false)
	ans.Flags(cmd, true)
	qf.flags(cmd)
	return cmd
}

func endpointsUpdateCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var s endpointSettings
	var ans AnswerFlags
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
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			in, err := s.input(c)
			if err != nil {
				return err
			}
			if err := ans.Input(c, in); err != nil {
				return err
			}
			if err := qf.input(c, in); err != nil {
				return err
			}
			if len(in) == 0 {
				return cmdutil.Usage(errors.New("nothing to change: give --name, --mode, --target, --response-capture, an --answer-… flag, --handshake or a queue flag"))
			}
			ep, err := Find(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			var res struct{ UpdateEndpoint Endpoint }
			if err := client.Do(c.Context(), `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ `+Fields+` } }`, map[string]any{"id": ep.ID, "in": in}, &res); err != nil {
				return fmt.Errorf("update endpoint: %w", withTargetFlag(err))
			}
			return printEndpoint(stdout, out, "updated", res.UpdateEndpoint)
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	s.flags(cmd, true)
	ans.Flags(cmd, true)
	qf.flags(cmd)
	return cmd
}

func endpointsDeleteCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:     "delete ENDPOINT",
		Aliases: []string{"rm"},
		Short:   "Delete an Endpoint (its public URL stops answering)",
		Example: `  relay endpoints delete stripe`,
		Args:    cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.Start(c, env, out)
			if err != nil {
				return err
			}
			ep, err := Find(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			if err := client.Do(c.Context(), `mutation($id: ID!){ deleteEndpoint(id: $id) }`, map[string]any{"id": ep.ID}, nil); err != nil {
				return fmt.Errorf("delete endpoint: %w", err)
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, struct {
					ID      string `json:"id"`
					Deleted bool   `json:"deleted"`
				}{ep.ID, true})
			}
			fmt.Fprintf(stdout, "deleted endpoint %s (%s)\n", ep.ID, ep.Name)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	return cmd
}

// withTargetFlag names the flag in a refusal of the target (PROXY mode
// with none): the API's message names the field, this command's user
// needs the flag.
func withTargetFlag(err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Code == "INVALID_INPUT" && ae.Extensions["field"] == "target" {
		hinted := *ae
		hinted.Message += "; give it with --target, such as --target 3000"
		return &hinted
	}
	return err
}
