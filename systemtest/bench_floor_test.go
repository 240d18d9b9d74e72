package systemtest

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
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
	bin := harness.BinaryOf(b, "./systemtest/floorserver")
	// "least" stores one row without indexes and a history row; "relay"
	// stores what the relay's design must (floorserver/storage.go): the
	// log's schema with its unique IDs, stream order and chain, and the
	// history's indexes.
	for _, storage := range []string{"least", "relay"} {
		suffix := ""
		if storage != "least" {
			suffix = "-" + storage + "-storage"
		}
		b.Run("inspector"+suffix, func(b *testing.B) {
			bare := benchTarget{name: "bare", addr: benchServer(b, http.StatusNoContent, nil), host: "bare.test", want: http.StatusNoContent}
			benchCompare(b, bare, benchStartFloor(b, bin, "inspector", storage, ""), "floor/bare", nil)
		})
		b.Run("proxy"+suffix, func(b *testing.B) {
			local := benchServer(b, http.StatusOK, benchLocalAnswer)
			direct := benchTarget{name: "direct", addr: local, host: local, want: http.StatusOK}
			floor := benchStartFloor(b, bin, "proxy", storage, local)
			benchCompare(b, direct, floor, "floor/direct", func(b *testing.B, _, _ benchRun) { floorStages(b, floor.addr) })
		})
	}
}

// benchStartFloor starts floorserver (bin) in mode "inspector" or "proxy"
// with storage "least" or "relay"; in proxy mode with its agent, which
// forwards to local, and checks that a request comes back from local.
func benchStartFloor(b *testing.B, bin, mode, storage, local string) benchTarget {
	b.Helper()
	srv := harness.StartProcess(b, bin, floorArgs("-mode", mode, "-storage", storage, "-data", b.TempDir())...)
	addr := floorAddr(b, srv)
	if mode == "inspector" {
		return benchTarget{name: "floor", addr: addr, host: "floor.test", want: http.StatusNoContent,
			procs: []benchProc{{"floor", srv.PID()}}}
	}
	agentArgs := []string{"-mode", "agent", "-relay", addr, "-target", local}
	if p := os.Getenv("RELAY_BENCH_AGENT_TRACE"); p != "" { // as the relay's agent is traced
		agentArgs = append(agentArgs, "-trace", p)
	}
	agent := harness.StartProcess(b, bin, agentArgs...)
	floor := benchTarget{name: "floor", addr: addr, host: "floor.test", want: http.StatusOK,
		procs: []benchProc{{"floor", srv.PID()}, {"floor-agent", agent.PID()}}}
	benchCheckProxied(b, floor)
	return floor
}

// floorStages reports the medians of the floor's two waits per proxied
// request since the last call (floorserver/stages.go): the agent's hop and
// the durable commit of its answer.
func floorStages(b *testing.B, addr string) {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/floor/stages")
	if err != nil {
		b.Fatalf("floor stages: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("floor stages: %d %q %v", resp.StatusCode, body, err)
	}
	for line := range strings.Lines(string(body)) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), " ")
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			b.Fatalf("floor stages: %q: %v", line, err)
		}
		if name != "n" {
			b.ReportMetric(v, "floor-"+name)
		}
	}
}

// floorArgs adds -cpuprofile and -trace when RELAY_BENCH_CPUPROFILE and
// RELAY_BENCH_TRACE name a file, as the relay's benchmarks do (run one
// sub-benchmark at a time: each server writes the same file).
func floorArgs(args ...string) []string {
	if p := os.Getenv("RELAY_BENCH_CPUPROFILE"); p != "" {
		args = append(args, "-cpuprofile", p)
	}
	if p := os.Getenv("RELAY_BENCH_TRACE"); p != "" {
		args = append(args, "-trace", p)
	}
	// Parts of the relay's storage left out (floorserver -drop), to
	// measure what each costs.
	if d := os.Getenv("RELAY_BENCH_FLOOR_DROP"); d != "" {
		args = append(args, "-drop", d)
	}
	return args
}

// floorAddr is the address a floorserver prints as its first line.
func floorAddr(b *testing.B, p *harness.Process) string {
	b.Helper()
	var line string
	harness.Eventually(b, 30*time.Second, "floorserver's address", func() bool {
		out := p.Output()
		i := strings.IndexByte(out, '\n')
		line = strings.TrimSpace(out[:max(i, 0)])
		return i >= 0
	})
	return line
}
