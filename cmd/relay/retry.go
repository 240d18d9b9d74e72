package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func retryCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	cmd := &cobra.Command{
		Use:   "retry DELIVERY_ID [--server URL --token T]",
		Short: "Replay a stored delivery to its Endpoint's local target",
		Long: `Replay a stored delivery to its Endpoint's local target and print every
attempt. Exits 1 when the new attempt was not answered 2xx, 2 when the relay
refuses the retry (unknown id, bad token, no agent connected).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := conn.resolve(c.Flags(), env); err != nil {
				return err
			}
			if conn.token == "" {
				return errNotLoggedIn
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
			if err := callGraphQL(c.Context(), conn.server, conn.token, q, map[string]any{"id": args[0]}, &out); err != nil {
				return fmt.Errorf("retry: %w", err)
			}
			d := out.RetryDelivery
			for i, a := range d.Attempts {
				fmt.Fprintf(stdout, "attempt %d: %s\n", i+1, describeAttempt(a.Status, a.DurationMs, a.Error))
			}
			if n := len(d.Attempts); n == 0 || d.Attempts[n-1].Status == nil || *d.Attempts[n-1].Status < 200 || *d.Attempts[n-1].Status > 299 {
				return fmt.Errorf("retry: the new attempt was not answered 2xx")
			}
			return nil
		},
	}
	conn.flags(cmd.Flags())
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
