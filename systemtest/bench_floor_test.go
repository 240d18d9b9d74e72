package systemtest

import (
	"bufio"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// BenchmarkFloor runs the same loads as BenchmarkInspectorIngest and
// BenchmarkProxy against floorserver, the least a program can do with the
// relay's stack (Echo, a durable group-committed SQLite log through the same
// driver, a SQLite view; a WebSocket to an agent process in proxy mode). Its
// ratios bound from above what any relay built on that stack can reach on
// this machine.
//
//	go test -run '^$' -bench Floor -benchtime 20000x -timeout 30m ./systemtest
func BenchmarkFloor(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "floorserver")
	build := exec.Command("go", "build", "-o", bin, "./systemtest/floorserver")
	build.Dir = harness.ModuleRoot()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build floorserver: %v\n%s", err, out)
	}

	b.Run("inspector", func(b *testing.B) {
		bare := benchTarget{name: "bare", addr: benchServer(b, http.StatusNoContent, nil), host: "bare.test", want: http.StatusNoContent}
		addr, pid := startFloor(b, bin, "-mode", "inspector", "-data", b.TempDir())
		floor := benchTarget{name: "floor", addr: addr, host: "floor.test", want: http.StatusNoContent,
			procs: []benchProc{{"floor", pid}}}
		benchCompare(b, bare, floor, "floor/bare", nil)
	})
	b.Run("proxy", func(b *testing.B) {
		local := benchServer(b, http.StatusOK, benchLocalAnswer)
		direct := benchTarget{name: "direct", addr: local, host: local, want: http.StatusOK}
		addr, pid := startFloor(b, bin, "-mode", "proxy", "-data", b.TempDir())
		_, agentPID := startFloor(b, bin, "-mode", "agent", "-relay", addr, "-target", local)
		floor := benchTarget{name: "floor", addr: addr, host: "floor.test", want: http.StatusOK,
			procs: []benchProc{{"floor", pid}, {"floor-agent", agentPID}}}
		benchCheckProxied(b, floor)
		benchCompare(b, direct, floor, "floor/direct", nil)
	})
}

// startFloor runs floorserver with args and returns the address it printed
// (none for an agent) and its PID; it is stopped with SIGTERM at cleanup.
func startFloor(b *testing.B, bin string, args ...string) (addr string, pid int) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start floorserver: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	if args[1] == "agent" {
		return "", cmd.Process.Pid
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("floorserver %s printed no address: %v", args[1], err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}
