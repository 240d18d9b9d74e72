package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// retryJSON is `relay retry -o json`: the new attempt and every attempt.
type retryJSON struct {
	DeliveryID     string        `json:"deliveryId"`
	ResponseStatus *int          `json:"responseStatus"`
	Attempt        *attemptJSON  `json:"attempt"` // the new one
	Attempts       []attemptJSON `json:"attempts"`
}

// errNot2xx is a retry whose new attempt was not answered 2xx (exit 1).
var errNot2xx = errors.New("retry: the new attempt was not answered 2xx")

func retryCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	cmd := &cobra.Command{
		Use:   "retry DELIVERY_ID",
		Short: "Replay a stored delivery to its Endpoint's local target",
		Long: `Replay a stored delivery to its Endpoint's local target (through the
connected agent) and print the new attempt. Exits 1 when the new attempt was
not answered 2xx, 2 when the relay refuses the retry (unknown id, bad token,
no agent connected).`,
		Example: `  relay retry 0193a7c2-...
  relay retry 0193a7c2-... -o json | jq .attempt.status`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			client, err := conn.start(c, env, out)
			if err != nil {
				return err
			}
			const q = `mutation($id: ID!){ retryDelivery(id: $id){ id responseStatus attempts{ id status startedAt durationMs error retry late } } }`
			var res struct {
				RetryDelivery struct {
					ID             string
					ResponseStatus *int
					Attempts       []attemptJSON
				}
			}
			if err := client.Do(c.Context(), q, map[string]any{"id": args[0]}, &res); err != nil {
				return fmt.Errorf("retry: %w", err)
			}
			d := res.RetryDelivery
			r := retryJSON{DeliveryID: d.ID, ResponseStatus: d.ResponseStatus, Attempts: d.Attempts}
			if r.Attempts == nil {
				r.Attempts = []attemptJSON{}
			}
			if n := len(d.Attempts); n > 0 {
				r.Attempt = &d.Attempts[n-1]
			}
			if out.json() {
				if err := writeJSON(stdout, r); err != nil {
					return err
				}
			} else {
				for i, a := range d.Attempts {
					fmt.Fprintf(stdout, "attempt %d: %s\n", i+1, describeAttempt(a.Status, a.DurationMs, a.Error))
				}
			}
			if a := r.Attempt; a == nil || a.Status == nil || *a.Status < 200 || *a.Status > 299 {
				return errNot2xx
			}
			return nil
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
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
