package systemtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestThirdPartyGraphQLWSAgent: an agent written with the graphql-ws client
// library (npm), which offers graphql-transport-ws only, still receives
// forward requests as GraphQL results and completes them with
// completeForward: the binary data path is an addition, not a requirement.
func TestThirdPartyGraphQLWSAgent(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (apt-get install nodejs npm)")
	}
	dir, _ := filepath.Abs("testdata/gqlagent")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "graphql-ws")); err != nil {
		t.Skip("graphql-ws is not installed: (cd systemtest/testdata/gqlagent && npm ci)")
	}
	r := harness.Start(t, "")
	a := signUpTenant(t, r, "third-party")
	ep := proxyEndpoint(t, r, a.Token, "127.0.0.1:9", false)
	var out lockedBuffer
	cmd := exec.Command(node, filepath.Join(dir, "agent.mjs"), "ws://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", a.Token, ep.ID)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	waitAgent(t, r, a.Token, ep.ID, true)

	for i, body := range [][]byte{[]byte(`{"n":1}`), bytes.Repeat([]byte("x"), 100_000)} {
		resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/hook/" + strconv.Itoa(i) + "?q=1", Host: r.AddressHost(ep.ID), Body: body})
		var got struct {
			Agent, Method, Path string
			Bytes               int
		}
		if resp.Status != 200 || json.Unmarshal(resp.Body, &got) != nil || got.Agent != "graphql-ws" ||
			got.Path != "/hook/"+strconv.Itoa(i)+"?q=1" || got.Bytes != len(body) {
			t.Fatalf("sender got %d %s, want the graphql-ws agent's 200 naming the request\nagent output:\n%s", resp.Status, resp.Body, out.String())
		}
	}
	harness.Eventually(t, 10*time.Second, "the agent to log both completions", func() bool {
		return strings.Count(out.String(), "completed ") == 2
	})
}
