// Package inspector is `relay inspector`: a throwaway address that records
// and answers without an account.
package inspector

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/endpoints"
)

// inspectorJSON is an inspector as `relay inspector create -o json` prints it.
type inspectorJSON struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
	Smee      bool   `json:"smee"`
}

// inspectorAnswerJSON is an inspector as `relay inspector answer -o json`
// prints it.
type inspectorAnswerJSON struct {
	ID         string                    `json:"id"`
	URL        string                    `json:"url"`
	Answer     *endpoints.AnswerJSON     `json:"answer"`
	Handshakes *endpoints.HandshakesJSON `json:"handshakes"`
}

// Command is `relay inspector`.
func Command(env func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspector",
		Short: "Create a guest inspector: a temporary URL that records what it receives",
		Example: `  relay inspector create
  relay deliveries list $(relay inspector create -o json | jq -r .id)
  relay inspector answer INSPECTOR --answer-status 200 --answer-body ok --handshake slack`,
	}
	var conn cmdutil.Connection
	var out cmdutil.Output
	var smee bool
	create := &cobra.Command{
		Use:        "create",
		SuggestFor: []string{"new"},
		Short:      "Create an inspector (no account needed) and print its URL",
		Example: `  url=$(relay inspector create | head -1)
  curl -d hello "$url"
  relay inspector create --smee   # a smee.io-compatible URL for WEBHOOK_PROXY_URL`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			var res struct{ CreateInspector inspectorJSON }
			err := conn.Client("").Do(c.Context(), `mutation($smee: Boolean){ createInspector(smee: $smee){ id url expiresAt smee } }`,
				map[string]any{"smee": smee}, &res)
			if err != nil {
				return fmt.Errorf("create inspector: %w", err)
			}
			in := res.CreateInspector
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, in)
			}
			fmt.Fprintf(stdout, "%s\ninspector %s, expires %s unless it receives requests; see them with: relay deliveries list %s%s\n", in.URL, in.ID, cmdutil.LocalTime(in.ExpiresAt), in.ID, conn.ServerHint(env))
			if in.Smee {
				fmt.Fprintf(stdout, "smee-compatible: WEBHOOK_PROXY_URL=%s (smee-client, gosmee and Probot read it unchanged)\n", in.URL)
				fmt.Fprint(stdout, cmdutil.SmeeLocalhostNote(in.URL))
			}
			return nil
		},
	}
	create.Flags().BoolVar(&smee, "smee", false, "make it smee.io-compatible: smee's clients (smee-client, gosmee, Probot) read its deliveries as a stream")
	conn.Flags(create.Flags())
	out.Flags(create.Flags())
	cmd.AddCommand(create, inspectorAnswerCommand(env, stdout))
	return cmd
}

func inspectorAnswerCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var ans endpoints.AnswerFlags
	cmd := &cobra.Command{
		Use:   "answer INSPECTOR",
		Short: "Show or set what an inspector answers, and the handshakes it answers itself (no account needed)",
		Example: `  relay inspector answer k3x9q2
  relay inspector answer k3x9q2 --answer-status 200 --answer-header Content-Type=text/plain --answer-body ok
  relay inspector answer k3x9q2 --handshake zoom --zoom-secret-file zoom.secret
  relay inspector answer k3x9q2 --answer-status 204 --handshake none`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conn.StartTokenOptional(c, env, out); err != nil {
				return err
			}
			in := map[string]any{}
			if err := ans.Input(c, in); err != nil {
				return err
			}
			vars := map[string]any{"id": args[0], "answer": in["answer"], "handshakes": in["handshakes"]}
			var res struct {
				SetInspectorAnswer *inspectorAnswerJSON
				Inspector          *inspectorAnswerJSON
			}
			fields := `{ id url ` + endpoints.AnswerFields + ` }`
			var err error
			if len(in) == 0 {
				err = conn.Client("").Do(c.Context(), `query($id: ID!){ inspector(id: $id)`+fields+` }`, map[string]any{"id": args[0]}, &res)
			} else {
				err = conn.Client("").Do(c.Context(), `mutation($id: ID!, $answer: AnswerInput, $handshakes: HandshakesInput){
					setInspectorAnswer(id: $id, answer: $answer, handshakes: $handshakes)`+fields+` }`, vars, &res)
			}
			if err != nil {
				return fmt.Errorf("inspector answer: %w", err)
			}
			got := res.SetInspectorAnswer
			if got == nil {
				got = res.Inspector
			}
			if got == nil {
				return &apiclient.Error{Message: fmt.Sprintf("no inspector %q", args[0]), Code: "NOT_FOUND"}
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, got)
			}
			fmt.Fprintf(stdout, "inspector:   %s\nurl:         %s\n", got.ID, got.URL)
			endpoints.PrintAnswers(stdout, "", got.Answer, got.Handshakes)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	ans.Flags(cmd, false)
	return cmd
}
