package desktop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// httpClient bounds every API call, so a relay that accepts and never
// answers cannot hang the window.
var httpClient = &http.Client{Timeout: 30 * time.Second}

// callGraphQL posts one operation to server's /graphql with the bearer
// token and decodes its data into out; a GraphQL error is returned with
// its code.
func callGraphQL(ctx context.Context, server, token, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	url := strings.TrimRight(strings.TrimSpace(server), "/") + "/graphql"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("relay URL %q: %w", server, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&res); err != nil {
		return fmt.Errorf("no relay GraphQL API at %s (%s)", url, resp.Status)
	}
	if len(res.Errors) > 0 {
		e := res.Errors[0]
		if e.Extensions.Code != "" {
			return fmt.Errorf("%s (%s)", e.Message, e.Extensions.Code)
		}
		return fmt.Errorf("%s", e.Message)
	}
	return json.Unmarshal(res.Data, out)
}
