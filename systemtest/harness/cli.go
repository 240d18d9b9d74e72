package harness

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// RunCLI runs the relay binary once with args (for commands such as
// `accounts create` or `retry`) and returns what it printed, stdout and
// stderr together, and its exit code. A command still running after a
// minute is killed and fails the test.
func RunCLI(t testing.TB, args ...string) (output string, exitCode int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, Binary(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("relay %v did not finish within a minute:\n%s", args, out)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatalf("run relay %v: %v", args, err)
	}
	return string(out), 0
}
