package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

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
			body, _ := json.Marshal(map[string]any{"query": q, "variables": map[string]any{"id": args[0]}})
			req, err := http.NewRequestWithContext(c.Context(), http.MethodPost, strings.TrimRight(server, "/")+"/graphql", bytes.NewReader(body))
			if err != nil {
				return fmt.Errorf("retry: %w", err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("retry: %w", err)
			}
			defer resp.Body.Close()
			var out struct {
				Data struct {
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
				Errors []struct {
					Message    string
					Extensions map[string]any
				}
			}
			if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
				return fmt.Errorf("retry: %s answered %s: %w", server, resp.Status, err)
			}
			if len(out.Errors) > 0 {
				return fmt.Errorf("retry refused: %s (%v)", out.Errors[0].Message, out.Errors[0].Extensions["code"])
			}
			d := out.Data.RetryDelivery
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
