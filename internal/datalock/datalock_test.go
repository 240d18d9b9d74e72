package datalock

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSecondHolderIsRefusedWithThePID takes the lock in a child process (a
// flock is per open file, so the refusal must come from another process as
// in production) and checks that Acquire names the child's PID, then that
// the lock is free again once the child ends.
func TestSecondHolderIsRefusedWithThePID(t *testing.T) {
	dir := t.TempDir()
	// flock(1) holds the lock for as long as its command runs.
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) is not installed (Debian: apt-get install util-linux)")
	}
	path := filepath.Join(dir, FileName)
	cmd := exec.Command(flock, path, "sh", "-c", "echo $$ > "+path+"; echo ready; read x")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf), "ready") {
		t.Fatalf("child not ready: %q %v", buf, err)
	}
	b, _ := os.ReadFile(path)
	childPID, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	_, err = Acquire(dir)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != childPID || childPID == 0 {
		t.Fatalf("Acquire while held: %v, want a HeldError naming %d", err, childPID)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(childPID)) {
		t.Errorf("message %q does not name the holder", err)
	}

	stdin.Close()
	_ = cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder ended: %v", err)
	}
	defer l.Release()
	b, _ = os.ReadFile(path)
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this PID", b)
	}
}
