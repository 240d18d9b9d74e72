package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// gqlClient is the CLI's one HTTP client: bounded, so a relay that
// accepts the connection and never answers cannot hang a command.
var gqlClient = &http.Client{Timeout: 2 * time.Minute}

// refusedError is a GraphQL error the relay answered with.
type refusedError struct {
	Message string
	Code    string // extensions.code; empty when the server gave none
}

func (e *refusedError) Error() string {
	if e.Code == "" {
		return "refused: " + e.Message
	}
	return fmt.Sprintf("refused: %s (%s)", e.Message, e.Code)
}

// refusal reports whether the relay refused the request as asked (bad
// token, unknown id, invalid input: exit 2) rather than failing to carry
// it out (unavailable, rate limited, a concurrent change, an internal
// error: exit 1).
func (e *refusedError) refusal() bool {
	switch e.Code {
	case "", "INTERNAL", "UNAVAILABLE", "RATE_LIMITED", "CONFLICT":
		return false
	}
	return true
}

// callGraphQL posts one GraphQL operation to the relay at server with the
// bearer token and decodes its data into out. A GraphQL error is returned
// as a *refusedError; an answer that is not a GraphQL response names the
// server as no relay.
func callGraphQL(ctx context.Context, server, token, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	endpoint := strings.TrimRight(server, "/") + "/graphql"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return usage(fmt.Errorf("--server %q: %w", server, err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := gqlClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	notRelay := func(why string) error {
		return fmt.Errorf("no relay GraphQL API at %s (%s answered %s, %s)", server, endpoint, resp.Status, why)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" && ct != "application/graphql-response+json" {
		return notRelay(fmt.Sprintf("content type %q", resp.Header.Get("Content-Type")))
	}
	var res struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions map[string]any
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&res); err != nil {
		return notRelay("not a GraphQL response: " + err.Error())
	}
	if len(res.Errors) > 0 {
		code, _ := res.Errors[0].Extensions["code"].(string)
		return &refusedError{Message: res.Errors[0].Message, Code: code}
	}
	if len(res.Data) == 0 || bytes.Equal(res.Data, []byte("null")) {
		return notRelay("no data and no errors")
	}
	if err := json.Unmarshal(res.Data, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}
