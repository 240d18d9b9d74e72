package harness

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Agent is a running `relay agent` process.
type Agent struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// StartAgent runs the real agent for an Endpoint, forwarding to target. The
// server URL names 127.0.0.1: an IP host reaches the bare domain.
func (r *Relay) StartAgent(t testing.TB, token, endpointID, target string) *Agent {
	t.Helper()
	return r.StartAgentVia(t, "http://127.0.0.1:"+strconv.Itoa(r.Port), token, endpointID, target)
}

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

// Output is what the agent printed.
func (a *Agent) Output() string { return a.out.String() }

// Stop sends SIGTERM and waits.
func (a *Agent) Stop(t testing.TB) {
	t.Helper()
	select {
	case <-a.done:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		t.Errorf("agent did not stop on SIGTERM:\n%s", a.out.String())
	}
}

// Kill ends the agent with SIGKILL.
func (a *Agent) Kill() {
	_ = a.cmd.Process.Kill()
	<-a.done
}

// Eventually polls cond until it holds or the limit passes.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(25 * time.Millisecond) // polling helper: the only place tests wait
	}
}
