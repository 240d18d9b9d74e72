package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/commands"
)

func accountsCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var data, name, eventstoreURL string
	cmd := &cobra.Command{Use: "accounts", Short: "Manage accounts (when sign-up is closed)"}
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create an account and print its API token (shown once); run it while the server is stopped",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := bindEnv(c.Flags(), env); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			a, err := openApp(c.Context(), data, eventstoreURL, log)
			if err != nil {
				return err
			}
			svc := commands.New(commands.Config{InspectorTTL: time.Hour, ForwardTimeout: time.Second}, a.store, a.codec, a.views, nil, nil, log)
			acc, token, err := svc.CreateAccount(c.Context(), name)
			if err == nil {
				fmt.Fprintf(stdout, "account %s (%s)\ntoken %s\n", acc.ID, acc.Name, token)
			}
			return joinClose(err, a.close())
		},
	}
	create.Flags().StringVar(&data, "data", "./relay-data", "the relay's data folder")
	create.Flags().StringVar(&eventstoreURL, "eventstore", "", "EventStoreDB connection string; empty: the embedded log under --data")
	create.Flags().StringVar(&name, "name", "", "account name")
	_ = create.MarkFlagRequired("name")
	cmd.AddCommand(create)
	return cmd
}
