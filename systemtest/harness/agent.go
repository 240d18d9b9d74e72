package harness

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
)

// Process is a program a test started: its output is kept, and it is
// stopped with SIGTERM at cleanup.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

// StartProcess runs bin with args until the test ends.
func StartProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	return StartWith(t, Command{Bin: bin}, args...)
}

// Agent is a running `relay agent` process.
type Agent = Process

// StartAgent runs the real agent for an Endpoint, forwarding to target. The
// server URL names 127.0.0.1: an IP host reaches the bare domain.
func (r *Relay) StartAgent(t testing.TB, token, endpointID, target string) *Agent {
	t.Helper()
	return r.StartAgentVia(t, "http://127.0.0.1:"+strconv.Itoa(r.Port), token, endpointID, target)
}

// StartAgentVia runs the real agent for an Endpoint with an explicit
// --server URL, forwarding to target: tests of how the agent reaches the
// relay (bare domain, IP literal, wrong host) choose the URL themselves.
func (r *Relay) StartAgentVia(t testing.TB, serverURL, token, endpointID, target string, extra ...string) *Agent {
	t.Helper()
	// The token travels as users are told to pass it: in RELAY_TOKEN.
	return StartWith(t, Command{Env: []string{"RELAY_TOKEN=" + token}}, append([]string{"agent", "--server", serverURL,
		"--endpoint", endpointID, "--target", target}, extra...)...)
}

// Output is what the process printed, stdout and stderr together.
func (p *Process) Output() string { return p.out.String() }

// Stop sends SIGTERM and waits.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop on SIGTERM:\n%s", p.name, p.out.String())
	}
}

// ExitCode reports whether the process has ended and, if so, its exit code.
func (p *Process) ExitCode() (exited bool, code int) {
	select {
	case <-p.done:
		return true, p.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// Kill ends the process with SIGKILL.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Eventually polls cond until it holds, failing t after limit (see
// testwait.CheckFor).
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.CheckFor(t, limit, 25*time.Millisecond, func() error {
		if !cond() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

// Signal sends sig to the process (os.Interrupt: what Ctrl-C sends).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }
