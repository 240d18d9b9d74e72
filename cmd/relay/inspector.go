package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
)

// inspectorJSON is an inspector as `relay inspector create -o json` prints it.
type inspectorJSON struct {
	ID        string `json:"id"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
}

func inspectorCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspector",
		Short: "Create a guest inspector: a temporary URL that records what it receives",
		Example: `  relay inspector create
  relay deliveries list $(relay inspector create -o json | jq -r .id)`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	var conn connection
	var out output
	create := &cobra.Command{
		Use:   "create",
		Short: "Create an inspector (no account needed) and print its URL",
		Example: `  url=$(relay inspector create | head -1)
  curl -d hello "$url"`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if err := conn.resolve(c.Flags(), env); err != nil {
				return err
			}
			var res struct{ CreateInspector inspectorJSON }
			if err := apiclient.New(conn.server, "").Do(c.Context(), `mutation{ createInspector{ id url expiresAt } }`, nil, &res); err != nil {
				return fmt.Errorf("create inspector: %w", err)
			}
			in := res.CreateInspector
			if out.json() {
				return writeJSON(stdout, in)
			}
			fmt.Fprintf(stdout, "%s\ninspector %s, expires %s unless it receives requests; see them with: relay deliveries list %s\n", in.URL, in.ID, in.ExpiresAt, in.ID)
			return nil
		},
	}
	conn.flags(create.Flags())
	out.flags(create.Flags())
	cmd.AddCommand(create)
	return cmd
}
