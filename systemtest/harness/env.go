package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Command is how RunWith and StartWith run a program: Bin (the relay
// binary when empty), extra environment on top of the test's, standard
// input (none when nil) and working folder (the test's when empty).
type Command struct {
	Bin   string
	Env   []string
	Stdin io.Reader
	Dir   string
}

func (c Command) cmd(t testing.TB, ctx context.Context, args []string) *exec.Cmd {
	t.Helper()
	bin := c.Bin
	if bin == "" {
		bin = Binary(t)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stdin = c.Stdin
	cmd.Dir = c.Dir
	return cmd
}

// RunWith is RunCLI for a Command: it returns stdout and stderr together
// and the exit code; a run longer than two minutes fails the test.
func RunWith(t testing.TB, c Command, args ...string) (output string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.cmd(t, ctx, args).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish within two minutes:\n%s", c.Bin, args, out)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("run %s %v: %v", c.Bin, args, err)
	}
	return string(out), 0
}

// StartWith is StartProcess for a Command (its Stdin is ignored): the
// program runs until the test ends and is stopped with SIGTERM.
func StartWith(t testing.TB, c Command, args ...string) *Process {
	t.Helper()
	cmd := c.cmd(t, context.Background(), args)
	if _, ok := c.Stdin.(*os.File); !ok {
		// Only a file (a terminal's end) is kept: a process started here
		// reads no other input.
		cmd.Stdin = nil
	}
	p := &Process{name: filepath.Base(cmd.Path), out: &syncBuffer{}, done: make(chan struct{}), cmd: cmd}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Stop(t) })
	return p
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
