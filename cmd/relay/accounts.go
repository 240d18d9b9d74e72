package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
)

func accountsCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var data, name, eventstoreURL, server, adminToken string
	cmd := &cobra.Command{Use: "accounts", Short: "Manage accounts (when sign-up is closed)",
		Example: `  RELAY_ADMIN_TOKEN=... relay accounts create --name alice`}
	create := &cobra.Command{
		Use:     "create --name NAME [--server URL --admin-token T]",
		Short:   "Create an account and print its API token (shown once)",
		Example: `  RELAY_ADMIN_TOKEN=... relay accounts create --name alice --server https://relay.example.com`,
		Long: `Create an account and print its API token (shown once).

With --server, the running relay creates it (its --admin-token is required).
Without, it is appended to the log under --data directly, which is refused
while a server uses that folder.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := bindEnv(c.Flags(), env); err != nil {
				return err
			}
			if server != "" {
				const q = `mutation($name: String!){ createAccount(name: $name){ token account{ id name } } }`
				var out struct {
					CreateAccount struct {
						Token   string
						Account struct{ ID, Name string }
					}
				}
				if err := callGraphQL(c.Context(), server, adminToken, q, map[string]any{"name": name}, &out); err != nil {
					return fmt.Errorf("create account: %w", err)
				}
				a := out.CreateAccount
				fmt.Fprintf(stdout, "account %s (%s)\ntoken %s\n", a.Account.ID, a.Account.Name, a.Token)
				return nil
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
				fmt.Fprintf(stdout, "account %s (%s)\ntoken %s\n", acc.ID, acc.Name, token)
			}
			return joinClose(err, a.Close())
		},
	}
	create.Flags().StringVar(&data, "data", "./relay-data", "the relay's data folder")
	create.Flags().StringVar(&eventstoreURL, "eventstore", "", "event log: nats://host:4222 (JetStream; comma-separated cluster seeds), esdb://host:2113?tls=false (EventStoreDB); empty: the embedded log under --data")
	create.Flags().StringVar(&name, "name", "", "account name")
	create.Flags().StringVar(&server, "server", "", "URL of the running relay; empty: write to --data directly")
	create.Flags().StringVar(&adminToken, "admin-token", "", "the running relay's --admin-token (with --server)")
	_ = create.MarkFlagRequired("name")
	cmd.AddCommand(create)
	return cmd
}
