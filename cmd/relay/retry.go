package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func retryCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var server, token string
	cmd := &cobra.Command{
		Use:   "retry DELIVERY_ID --server URL --token T",
		Short: "Replay a stored delivery to its Endpoint's local target",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := bindEnv(c.Flags(), env); err != nil {
				return err
			}
			const q = `mutation($id: ID!){ retryDelivery(id: $id){ id responseStatus attempts{ status durationMs error retry } } }`
			var out struct {
				RetryDelivery *struct {
					ID             string
					ResponseStatus *int
					Attempts       []struct {
						Status     *int
						DurationMs *int
						Error      *string
					}
				}
			}
			if err := callGraphQL(c.Context(), server, token, q, map[string]any{"id": args[0]}, &out); err != nil {
				return fmt.Errorf("retry: %w", err)
			}
			d := out.RetryDelivery
			for i, a := range d.Attempts {
				fmt.Fprintf(stdout, "attempt %d: %s\n", i+1, describeAttempt(a.Status, a.DurationMs, a.Error))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "http://localhost:8080", "the relay's URL")
	cmd.Flags().StringVar(&token, "token", "", "API token")
	return cmd
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
