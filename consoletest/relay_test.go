package consoletest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"testing"
)

// send makes a request to an address's public URL. It connects to
// 127.0.0.1 and names the address in the Host header, as a sender's DNS
// would.
func send(t *testing.T, address, method, path string, header http.Header, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+srv.addr()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = fmt.Sprintf("%s.localhost:%d", address, srv.port)
	for name, values := range header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s to %s: %v", method, path, address, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// graphql runs an operation against the relay from Go (test setup only;
// the console itself is driven through the browser).
func graphql(t *testing.T, token, query string, vars map[string]any, out any) {
	t.Helper()
	payload, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+srv.addr()+"/graphql", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = fmt.Sprintf("localhost:%d", srv.port)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("graphql: %v", err)
	}
	defer res.Body.Close()
	var body struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("graphql: decode: %v", err)
	}
	if len(body.Errors) > 0 {
		t.Fatalf("graphql: %s", body.Errors[0].Message)
	}
	if err := json.Unmarshal(body.Data, out); err != nil {
		t.Fatalf("graphql: decode data: %v", err)
	}
}

// newInspector creates a guest inspector through the API.
func newInspector(t *testing.T) string {
	t.Helper()
	var out struct {
		CreateInspector struct{ ID string } `json:"createInspector"`
	}
	graphql(t, "", `mutation { createInspector { id } }`, nil, &out)
	return out.CreateInspector.ID
}

// startAgent runs the real `relay agent` with these flags; it is killed by
// PID when the test ends unless the test stopped it first.
func startAgent(t *testing.T, flags ...string) *exec.Cmd {
	t.Helper()
	out := &lockedBuffer{}
	cmd := exec.Command(relayBin, append([]string{"agent"}, flags...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("agent output:\n%s", out.tail(4096))
		}
	})
	return cmd
}
