package harness

import (
	"os/exec"
	"testing"
)

// StartAgentVia runs the real agent for an Endpoint with an explicit
// --server URL, forwarding to target. Pass r.BareURL(): the relay serves
// GraphQL (and the agent's WebSocket) only on its bare domain, so a server
// URL naming 127.0.0.1 is answered like an unknown public address (503).
func (r *Relay) StartAgentVia(t testing.TB, serverURL, token, endpointID, target string) *Agent {
	t.Helper()
	a := &Agent{out: &syncBuffer{}, done: make(chan struct{})}
	a.cmd = exec.Command(Binary(t), "agent", "--server", serverURL,
		"--token", token, "--endpoint", endpointID, "--target", target)
	a.cmd.Stdout = a.out
	a.cmd.Stderr = a.out
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	go func() { _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(func() { a.Stop(t) })
	return a
}
