package harness

import (
	"os/exec"
	"testing"
)

// StartAgentVia runs the real agent for an Endpoint with an explicit
// --server URL, forwarding to target: tests of how the agent reaches the
// relay (bare domain, IP literal, wrong host) choose the URL themselves.
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
