package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// callGraphQL posts one GraphQL operation to the relay at server with the
// bearer token and decodes its data into out. A GraphQL error is returned
// as an error naming its message and code.
func callGraphQL(ctx context.Context, server, token, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(server, "/")+"/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&res); err != nil {
		return fmt.Errorf("%s answered %s: %w", server, resp.Status, err)
	}
	if len(res.Errors) > 0 {
		return fmt.Errorf("refused: %s (%v)", res.Errors[0].Message, res.Errors[0].Extensions["code"])
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
