// Package accounts is `relay accounts`: the operator's invites, quotas and
// usage of the relay's accounts.
package accounts

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

// Command is `relay accounts`.
func Command(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var data, name, eventstoreURL, server, adminToken string
	var out cmdutil.Output
	cmd := &cobra.Command{Use: "accounts", Short: "Create accounts and invites; set their quotas and read their usage (the operator)",
		Example: `  RELAY_ADMIN_TOKEN=... relay accounts create --name alice`}
	create := &cobra.Command{
		Use:   "create --name NAME [--server URL --admin-token T]",
		Short: "Create an account and print its API token (shown once)",
		Example: `  RELAY_ADMIN_TOKEN=... relay accounts create --name alice --server https://relay.example.com
  relay accounts create --name ci --server https://relay.example.com -o json | jq -r .token`,
		Long: `Create an account and print its API token (shown once).

With --server, the running relay creates it (its --admin-token is required).
Without, it is appended to the log under --data directly, which is refused
while a server uses that folder.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := cmdutil.BindEnv(c.Flags(), env); err != nil {
				return err
			}
			if err := out.Check(); err != nil {
				return err
			}
			if server != "" {
				const q = `mutation($name: String!){ createAccount(name: $name){ token account{ id name } } }`
				var res struct {
					CreateAccount struct {
						Token   string
						Account struct{ ID, Name string }
					}
				}
				if err := cmdutil.CallGraphQL(c.Context(), server, adminToken, q, map[string]any{"name": name}, &res); err != nil {
					return fmt.Errorf("create account: %w", cmdutil.AdminRefused(err))
				}
				a := res.CreateAccount
				return printAccount(stdout, out, a.Account.ID, a.Account.Name, a.Token)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			a, err := app.New(c.Context(), app.Config{
				Data: data, EventStore: eventstoreURL, Logger: log, NoSweeps: true,
				Commands: commands.Config{InspectorTTL: time.Hour, ForwardTimeout: time.Second},
			})
			if err != nil {
				return err
			}
			acc, token, err := a.Service().CreateAccount(c.Context(), name)
			if err == nil {
				err = printAccount(stdout, out, acc.ID, acc.Name, token)
			}
			return cmdutil.JoinClose(err, a.Close())
		},
	}
	create.Flags().StringVar(&data, "data", "./relay-data", "the relay's data folder")
	create.Flags().StringVar(&eventstoreURL, "eventstore", "", "event log: nats://host:4222 (JetStream; comma-separated cluster seeds), esdb://host:2113?tls=false (EventStoreDB); empty: the embedded log under --data")
	create.Flags().StringVar(&name, "name", "", "account name")
	create.Flags().StringVar(&server, "server", "", "URL of the running relay; empty: write to --data directly")
	create.Flags().StringVar(&adminToken, "admin-token", "", "the running relay's --admin-token (with --server)")
	_ = create.MarkFlagRequired("name")
	out.Flags(create.Flags())
	cmd.AddCommand(create, accountsInviteCommand(env, stdout), accountsSetQuotaCommand(env, stdout), accountsUsageCommand(env, stdout))
	return cmd
}

func accountsInviteCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var expiresIn, adminToken string
	cmd := &cobra.Command{
		Use:   "invite [--expires-in 7d] [--admin-token T]",
		Short: "Make a one-time invite to sign up (for a relay run with --signup invite)",
		Example: `  relay accounts invite
  relay accounts invite --expires-in 2d -o json
  RELAY_ADMIN_TOKEN=... relay accounts invite --server https://relay.example.com`,
		Long: `Make an invite: whoever holds its code may create one account, before it
expires (7 days at most and by default). An owner of an account may invite
(20 open invites per account at most, 10 an hour); so may the operator with
the relay's --admin-token, without those bounds. The code is printed
once, with the console link that signs up with it; on the command line:
relay login --server URL --signup NAME --invite CODE.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			vars := map[string]any{}
			if c.Flags().Changed("expires-in") {
				if _, err := domain.ParseTokenLifetime(expiresIn); err != nil {
					return cmdutil.Usage(fmt.Errorf("--expires-in %q: %w", expiresIn, err))
				}
				vars["e"] = expiresIn
			}
			if err := out.Check(); err != nil {
				return err
			}
			var client *apiclient.Client
			var err error
			if err := cmdutil.BindEnv(c.Flags(), env); err != nil {
				return cmdutil.Usage(err)
			}
			if adminToken != "" {
				if err := conn.Resolve(c.Flags(), env); err != nil {
					return err
				}
				client = conn.Client(adminToken)
			} else if client, err = conn.LoggedIn(c.Flags(), env); err != nil {
				return err
			}
			var res struct {
				CreateInvite struct {
					Code, Path string
					URL        *string
					ExpiresAt  string
				}
			}
			if err := client.Do(c.Context(), `mutation($e: String){ createInvite(expiresIn: $e){ code path url expiresAt } }`, vars, &res); err != nil {
				if adminToken != "" {
					err = cmdutil.AdminRefused(err)
				}
				return fmt.Errorf("create invite: %w", err)
			}
			inv := res.CreateInvite
			link := cmdutil.ConsolePage(conn.Server, inv.Path, inv.URL)
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, inviteJSON{Code: inv.Code, URL: link, ExpiresAt: inv.ExpiresAt})
			}
			fmt.Fprintf(stdout, "invite %s (one account, until %s)\nsign up in the console: %s\nor: relay login --server %s --signup NAME --invite %s\n",
				inv.Code, cmdutil.LocalTime(inv.ExpiresAt), link, conn.Server, inv.Code)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&expiresIn, "expires-in", "", "lifetime such as 2d or 12h (at most and by default 7d)")
	cmd.Flags().StringVar(&adminToken, "admin-token", "", "the running relay's --admin-token, to invite as the operator")
	return cmd
}

// inviteJSON is `relay accounts invite -o json`.
// createdJSON is accounts create -o json: the account as signUp answers
// it, and its token (shown once).
type createdJSON struct {
	Account struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"account"`
	Token string `json:"token"`
}

// printAccount prints a new account and its token, as text or -o json.
func printAccount(w io.Writer, out cmdutil.Output, id, name, token string) error {
	if out.JSON() {
		var v createdJSON
		v.Account.ID, v.Account.Name, v.Token = id, name, token
		return cmdutil.WriteJSON(w, v)
	}
	_, err := fmt.Fprintf(w, "account %s (%s)\ntoken %s\n", id, name, token)
	return err
}

type inviteJSON struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"`
}
