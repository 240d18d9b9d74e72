package systemtest

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// BenchmarkPeers compares four ways of reaching the same local handler from
// a sender with calling it directly, in one run: frp (an http proxy: frps →
// frpc), chisel (a reverse TCP port forward: chisel server → chisel client),
// the relay's PROXY Endpoint (relay → agent, as BenchmarkProxy) and the
// relay's guest inspector (which records each request and answers 204
// itself, as BenchmarkInspectorIngest; the handler is not called). The two
// tunnels record nothing; the relay records every request. Each path runs at
// concurrency 1, 16 and 64 right after the handler called directly (the
// same b.N requests to each), and reports its rate as a share of the direct
// one, its latency, and the CPU its own processes spend per 1000 requests.
// At the end it prints all of them as one Markdown table (peersTable).
//
// RELAY_PEERS_ROUNDS (default 1) runs every path that many times, in rounds
// over all paths (frp, chisel, …, the floors, then frp again), each figure
// then the median of that many loads: a slow minute of a shared machine
// falls on all paths alike, not on the one path whose loads it meets. Each
// path's processes start in the first round and serve all its rounds.
//
// frps, frpc and chisel are taken from RELAY_PEERS_BIN; scripts/bench-peers
// builds pinned versions of them and runs this benchmark:
//
//	N=2000 RUNS=3 scripts/bench-peers
func BenchmarkPeers(b *testing.B) {
	dir := os.Getenv("RELAY_PEERS_BIN")
	if dir == "" {
		b.Skip("RELAY_PEERS_BIN is not set: scripts/bench-peers builds frp and chisel and runs this benchmark")
	}
	frps, frpc, chiselBin := benchPeerBin(b, dir, "frps"), benchPeerBin(b, dir, "frpc"), benchPeerBin(b, dir, "chisel")
	local := benchServer(b, http.StatusOK, benchLocalAnswer)
	direct := benchTarget{name: "direct", addr: local, host: local, want: http.StatusOK}

	paths := []struct {
		name, label string
		start       func(b *testing.B) benchTarget
	}{
		{"frp", "frp " + benchPeerVersion(b, frps) + ", http proxy (frps + frpc)",
			func(b *testing.B) benchTarget { return benchStartFRP(b, frps, frpc, local) }},
		{"chisel", "chisel " + benchPeerVersion(b, chiselBin) + ", reverse TCP forward (server + client)",
			func(b *testing.B) benchTarget { return benchStartChisel(b, chiselBin, local) }},
		{"relay-proxy", "relay PROXY Endpoint (relay + agent)",
			func(b *testing.B) benchTarget { return benchStartProxy(b, local) }},
		{"relay-inspector", "relay guest inspector, answers 204 itself (relay)",
			func(b *testing.B) benchTarget { return benchStartInspector(b, "inspector") }},
	}
	// The two floors (BenchmarkFloor) in the same run, so that each target
	// is read beside what the least program on the relay's stack reaches in
	// the same minutes.
	floor := harness.BinaryOf(b, "./systemtest/floorserver")
	for _, mode := range []struct{ name, label string }{{"proxy", "proxy (server + agent)"}, {"inspector", "answers 204 itself (server)"}} {
		for _, st := range []struct{ storage, key, label string }{
			{"least", "", "least floor"},
			{"relay", "-relay-storage", "floor with the relay's storage"},
		} {
			paths = append(paths, struct {
				name, label string
				start       func(b *testing.B) benchTarget
			}{"floor-" + mode.name + st.key, st.label + ", " + mode.label,
				func(b *testing.B) benchTarget { return benchStartFloor(b, floor, mode.name, st.storage, local) }})
		}
	}
	rounds := 1
	if s := os.Getenv("RELAY_PEERS_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("RELAY_PEERS_ROUNDS=%q: want a positive number of rounds", s)
		}
		rounds = n
	}
	table := peersTable{rounds: rounds}
	started := make([]*benchTarget, len(paths))
	for range rounds {
		for i, p := range paths {
			if started[i] == nil {
				t := p.start(b) // stopped when the whole benchmark ends
				started[i] = &t
			}
			t := *started[i]
			ok := b.Run(p.name, func(b *testing.B) {
				for _, c := range benchLevels {
					b.Run(fmt.Sprintf("c=%d", c), benchPair(c, direct, t, t.name+"/direct", func(b *testing.B, base, got benchRun) {
						benchP50Overhead(b, base, got)
						table.add(p.name, p.label, c, base, got)
					}))
				}
			})
			if !ok {
				b.Fatalf("%s failed: no table", p.name)
			}
		}
	}
	table.print(os.Stdout)
	fmt.Println()
	table.printTargets(os.Stdout)
	fmt.Println()
	table.printPooledTargets(os.Stdout)
}

// peersRow is one path at one concurrency in the table of BenchmarkPeers,
// with the figures of each load of it.
type peersRow struct {
	key   string // the path's name: relay-proxy, floor-proxy, …
	label string
	c     int
	loads []peersLoad
}

// peersLoad is the figures of one load of a path and of the direct load
// right before it. p50, p99 and over (the p50 added to direct) are in ms;
// cpu is CPU-s per 1000 requests of each of the path's processes; others
// is others-cpu %.
type peersLoad struct {
	n                                          int
	rps, direct, ratio, p50, p99, over, others float64
	cpu                                        []float64
}

// peersTable collects the rows of BenchmarkPeers, in the order measured.
type peersTable struct {
	rows   []peersRow
	rounds int // RELAY_PEERS_ROUNDS: the loads of a path were one per round
}

// add records one load of the path key (described by label) at
// concurrency c after base.
func (t *peersTable) add(key, label string, c int, base, got benchRun) {
	n := got.res.Requests
	l := peersLoad{
		n:   n,
		rps: got.res.RPS(), direct: base.res.RPS(), ratio: got.res.RPS() / base.res.RPS(),
		p50: ms(got.res.P50), p99: ms(got.res.P99), over: ms(got.res.P50 - base.res.P50),
		others: othersPct(got.cpu),
	}
	for _, d := range got.cpu.PerPID[1:] { // [0] is this process: the load generator
		l.cpu = append(l.cpu, d.Seconds()*1000/float64(n))
	}
	for i := range t.rows {
		if t.rows[i].key == key && t.rows[i].c == c {
			t.rows[i].loads = append(t.rows[i].loads, l)
			return
		}
	}
	t.rows = append(t.rows, peersRow{key: key, label: label, c: c, loads: []peersLoad{l}})
}

// figures is the row's figures: those of its one load of b.N requests, or
// with rounds (or -count) each the median over its loads. The framework's first call,
// with b.N = 1, only probes: the loads with fewer requests than the
// largest are left out.
func (r peersRow) figures() (peersLoad, int) {
	n := 0
	for _, l := range r.loads {
		n = max(n, l.n)
	}
	var loads []peersLoad
	for _, l := range r.loads {
		if l.n == n {
			loads = append(loads, l)
		}
	}
	med := func(f func(peersLoad) float64) float64 {
		v := make([]float64, len(loads))
		for i, l := range loads {
			v[i] = f(l)
		}
		return median(v)
	}
	m := peersLoad{
		n:      n,
		rps:    med(func(l peersLoad) float64 { return l.rps }),
		direct: med(func(l peersLoad) float64 { return l.direct }),
		ratio:  med(func(l peersLoad) float64 { return l.ratio }),
		p50:    med(func(l peersLoad) float64 { return l.p50 }),
		p99:    med(func(l peersLoad) float64 { return l.p99 }),
		over:   med(func(l peersLoad) float64 { return l.over }),
		others: med(func(l peersLoad) float64 { return l.others }),
		cpu:    make([]float64, len(loads[0].cpu)),
	}
	for j := range m.cpu {
		m.cpu[j] = med(func(l peersLoad) float64 { return l.cpu[j] })
	}
	return m, len(loads)
}

// print writes the table in Markdown under a title line, grouped by
// concurrency. CPU is the utime + stime of the path's own processes (not
// the load generator's): their total, then each in the order the label
// names them. others-cpu is the rest of the machine's busy time during the
// path's load, in % of all cores.
func (t peersTable) print(w io.Writer) {
	rows := slices.Clone(t.rows)
	slices.SortStableFunc(rows, func(a, b peersRow) int { return a.c - b.c })
	var lines []string
	loads := map[int]bool{}
	for _, r := range rows {
		f, k := r.figures()
		loads[k] = true
		var each []string
		for _, v := range f.cpu {
			each = append(each, fmt.Sprintf("%.3f", v))
		}
		cpu := fmt.Sprintf("%.3f", peersCPU(f))
		if len(each) > 1 {
			cpu += " (" + strings.Join(each, " + ") + ")"
		}
		lines = append(lines, fmt.Sprintf("| %d | %s | %s | %s | %.3f | %.2f | %.2f | %.2f | %s | %.1f |",
			r.c, r.label, thousands(f.rps), thousands(f.direct), f.ratio, f.p50, f.p99, f.over, cpu, f.others))
	}
	switch counts := slices.Sorted(maps.Keys(loads)); {
	case len(counts) == 1 && counts[0] == 1:
		fmt.Fprintln(w, "peers table: one load of each path at each concurrency")
	case len(counts) == 1:
		how := "one after the other"
		if t.rounds > 1 {
			how = "one in each round over all paths"
		}
		fmt.Fprintf(w, "peers table: each figure the median of %d loads of that path at that concurrency, %s\n", counts[0], how)
	default:
		fmt.Fprintf(w, "peers table: each figure the median of the loads of that path at that concurrency (%v loads)\n", counts)
	}
	fmt.Fprintln(w, "| c | path | req/s | direct req/s | × direct | p50 ms | p99 ms | p50 over direct ms | CPU-s per 1 000 req | others-cpu % |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// peersTargets are the relay's speed targets (docs/benchmarks.md), each a
// figure of one of its paths at one concurrency, read beside the same
// figure of the two floors in the same run.
var peersTargets = []struct {
	what        string
	c           int
	relay, path string // the relay's path; the floors' is "floor-"+path
	figure      func(peersLoad) float64
	atMost      bool // the figure must be at most limit, else at least
	limit       float64
	// vsDirect: how the figure reads the direct load (pooledTargets)
	vsDirect peersVsDirect
}{
	{"PROXY × direct, 16 senders (≥ 0.12)", 16, "relay-proxy", "proxy", peersRatio, false, 0.12, rateOverDirect},
	{"PROXY × direct, 64 senders (≥ 0.15)", 64, "relay-proxy", "proxy", peersRatio, false, 0.15, rateOverDirect},
	{"PROXY CPU-s per 1 000, server + agent, 16 senders (≤ 0.25)", 16, "relay-proxy", "proxy", peersCPU, true, 0.25, notDirect},
	{"PROXY CPU-s per 1 000, server + agent, 64 senders (≤ 0.25)", 64, "relay-proxy", "proxy", peersCPU, true, 0.25, notDirect},
	{"PROXY p50 over direct, one sender (≤ 0.6 ms)", 1, "relay-proxy", "proxy", func(l peersLoad) float64 { return l.over }, true, 0.6, p50OverDirect},
	{"inspector × direct, 16 senders (≥ 0.30)", 16, "relay-inspector", "inspector", peersRatio, false, 0.30, rateOverDirect},
	{"inspector × direct, 64 senders (≥ 0.45)", 64, "relay-inspector", "inspector", peersRatio, false, 0.45, rateOverDirect},
}

// peersVsDirect is how a target's figure reads the direct load.
type peersVsDirect int

const (
	notDirect      peersVsDirect = iota // CPU: nothing of the direct load
	rateOverDirect                      // the path's rate over direct's
	p50OverDirect                       // the path's p50 less direct's
)

func peersRatio(l peersLoad) float64 { return l.ratio }

func peersCPU(l peersLoad) float64 {
	var total float64
	for _, v := range l.cpu {
		total += v
	}
	return total
}

// printTargets writes, for each target whose relay row was measured, the
// relay's figure, the least floor's and that of the floor with the relay's
// storage, and whether the relay met it or which floors do not.
func (t peersTable) printTargets(w io.Writer) {
	figure := func(key string, c int, f func(peersLoad) float64) (float64, bool) {
		for _, r := range t.rows {
			if r.key == key && r.c == c {
				l, _ := r.figures()
				return f(l), true
			}
		}
		return 0, false
	}
	fmt.Fprintln(w, "targets: the relay beside both floors, the same figures as the table")
	fmt.Fprintln(w, "| target | relay | least floor | floor with the relay's storage | met? |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, g := range peersTargets {
		relay, ok := figure(g.relay, g.c, g.figure)
		if !ok {
			continue
		}
		meets := func(v float64) bool { return peersMeets(g.atMost, g.limit, v) }
		cell := func(key string) (string, bool, bool) {
			v, ok := figure(key, g.c, g.figure)
			if !ok {
				return "–", false, false
			}
			return peersFigure(v, g.limit), true, meets(v)
		}
		least, haveLeast, leastMeets := cell("floor-" + g.path)
		storage, haveStorage, storageMeets := cell("floor-" + g.path + "-relay-storage")
		verdict := "yes"
		switch {
		case meets(relay):
		case !haveLeast || !haveStorage:
			verdict = "no"
		case !leastMeets && !storageMeets:
			verdict = "no; beyond both floors"
		case !storageMeets:
			verdict = "no; beyond the floor with the relay's storage"
		case !leastMeets:
			verdict = "no; beyond the least floor"
		default:
			verdict = "no; both floors meet it"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", g.what, peersFigure(relay, g.limit), least, storage, verdict)
	}
}

// pooledDirect is the median over every direct load of the run at
// concurrency c (the one before each load of every path, of the largest
// request count): its rate and its p50 in ms. The direct handler is the
// same program before every path; one direct load's rate moved by up to
// a factor of two from the next (19 135 to 38 169 req/s at 64 senders in
// one run), and a path's "× direct" carried that load's noise with its
// own.
func (t peersTable) pooledDirect(c int) (rps, p50 float64, loads int) {
	n := 0
	for _, r := range t.rows {
		for _, l := range r.loads {
			if r.c == c {
				n = max(n, l.n)
			}
		}
	}
	var rates, p50s []float64
	for _, r := range t.rows {
		for _, l := range r.loads {
			if r.c == c && l.n == n {
				rates, p50s = append(rates, l.direct), append(p50s, l.p50-l.over)
			}
		}
	}
	return median(rates), median(p50s), len(rates)
}

// median is the median of v (0 for none); v is sorted in place.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// printPooledTargets writes the targets read against the run's pooled
// direct load (pooledDirect): each path's median rate over the median of
// every direct load at that concurrency, and its median p50 over theirs.
// The CPU targets owe nothing to the direct loads: they are in the table
// above alone.
func (t peersTable) printPooledTargets(w io.Writer) {
	pooled := func(key string, c int, how peersVsDirect) (float64, bool) {
		for _, r := range t.rows {
			if r.key == key && r.c == c {
				l, _ := r.figures()
				rps, p50, _ := t.pooledDirect(c)
				if how == rateOverDirect {
					return l.rps / rps, true
				}
				return l.p50 - p50, true
			}
		}
		return 0, false
	}
	fmt.Fprintln(w, "pooled targets: the same, each rate over the median of every direct load of the run at its concurrency, each p50 over theirs")
	fmt.Fprintln(w, "| target | direct loads pooled | direct req/s (p50 ms) | relay | least floor | floor with the relay's storage | met? |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	for _, g := range peersTargets {
		if g.vsDirect == notDirect {
			continue
		}
		relay, ok := pooled(g.relay, g.c, g.vsDirect)
		if !ok {
			continue
		}
		meets := func(v float64) bool { return peersMeets(g.atMost, g.limit, v) }
		cell := func(key string) string {
			v, ok := pooled(key, g.c, g.vsDirect)
			if !ok {
				return "–"
			}
			return peersFigure(v, g.limit)
		}
		verdict := "no"
		if meets(relay) {
			verdict = "yes"
		}
		rps, p50, n := t.pooledDirect(g.c)
		fmt.Fprintf(w, "| %s | %d | %s (%.2f) | %s | %s | %s | %s |\n", g.what, n, thousands(rps), p50,
			peersFigure(relay, g.limit), cell("floor-"+g.path), cell("floor-"+g.path+"-relay-storage"), verdict)
	}
}

// peersMeets tells whether v meets a target of limit: at most limit when
// atMost, else at least.
func peersMeets(atMost bool, limit, v float64) bool {
	if atMost {
		return v <= limit
	}
	return v >= limit
}

// peersFigure is v to three decimals, or four when three would show it
// equal to limit without being so (0.4497 against 0.45): the table must
// not print a figure that looks met beside a verdict that says it is not.
func peersFigure(v, limit float64) string {
	f := fmt.Sprintf("%.3f", v)
	if v != limit && f == fmt.Sprintf("%.3f", limit) {
		return fmt.Sprintf("%.4f", v)
	}
	return f
}

// thousands is v rounded, with a space between groups of three digits.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}

// benchPeerBin is the path of the program name in dir; the benchmark fails
// when it is not there (scripts/bench-peers builds it).
func benchPeerBin(b *testing.B, dir, name string) string {
	b.Helper()
	path := filepath.Join(dir, name)
	if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		b.Fatalf("no %s program in RELAY_PEERS_BIN=%s: scripts/bench-peers builds it", name, dir)
	}
	return path
}

// benchPeerVersion is the version a peer program reports with --version.
func benchPeerVersion(b *testing.B, bin string) string {
	b.Helper()
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		b.Fatalf("%s --version: %v", bin, err)
	}
	return strings.TrimSpace(string(out))
}

// benchStartPeer runs a tunnel program until the benchmark ends, with no
// proxy from the environment on its way. It is killed at cleanup.
func benchStartPeer(b *testing.B, bin, dir string, args ...string) *harness.Process {
	b.Helper()
	p := harness.StartWith(b, harness.Command{Bin: bin, Dir: dir, Env: []string{
		"http_proxy=", "https_proxy=", "all_proxy=", "HTTP_PROXY=", "HTTPS_PROXY=", "ALL_PROXY=",
	}}, args...)
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("%s output (last lines):\n%s", filepath.Base(bin), benchTail(p.Output(), 20))
		}
	})
	b.Cleanup(p.Kill) // runs before StartWith's own cleanup, which then finds it ended
	return p
}

// benchWaitListening waits until something accepts connections on addr,
// failing the benchmark if p ends first.
func benchWaitListening(b *testing.B, p *harness.Process, name, addr string) {
	b.Helper()
	harness.Eventually(b, 30*time.Second, name+" to listen on "+addr, func() bool {
		if p.Exited() {
			b.Fatalf("%s exited:\n%s", name, p.Output())
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// benchWaitAnswered waits until a request sent to t comes back with the
// local handler's answer, failing the benchmark if one of procs ends first.
func benchWaitAnswered(b *testing.B, t benchTarget, procs ...*harness.Process) {
	b.Helper()
	harness.Eventually(b, 30*time.Second, t.name+" to reach the local handler", func() bool {
		for _, p := range procs {
			if p.Exited() {
				b.Fatalf("a %s process exited:\n%s", t.name, p.Output())
			}
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+t.addr+"/webhooks/check", bytes.NewReader(jsonBody))
		req.Host = t.host
		resp, err := harness.Client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && bytes.Equal(body, benchLocalAnswer)
	})
	benchCheckProxied(b, t)
}

// benchStartFRP starts frps and frpc with an http proxy to local, routed by
// Host, and returns the target that sends the load through them.
func benchStartFRP(b *testing.B, frps, frpc, local string) benchTarget {
	b.Helper()
	dir := b.TempDir()
	bindPort, httpPort := harness.FreePort(b), harness.FreePort(b)
	localHost, localPort, err := net.SplitHostPort(local)
	if err != nil {
		b.Fatal(err)
	}
	const host = "frp.bench.test"
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			b.Fatal(err)
		}
		return path
	}
	serverConf := write("frps.toml", fmt.Sprintf(`bindAddr = "127.0.0.1"
bindPort = %d
proxyBindAddr = "127.0.0.1"
vhostHTTPPort = %d
log.level = "warn"
`, bindPort, httpPort))
	clientConf := write("frpc.toml", fmt.Sprintf(`serverAddr = "127.0.0.1"
serverPort = %d
log.level = "warn"

[[proxies]]
name = "bench"
type = "http"
localIP = %q
localPort = %s
customDomains = [%q]
`, bindPort, localHost, localPort, host))

	server := benchStartPeer(b, frps, dir, "-c", serverConf)
	// frpc gives up when its first login fails: start it once frps listens.
	benchWaitListening(b, server, "frps", "127.0.0.1:"+strconv.Itoa(bindPort))
	client := benchStartPeer(b, frpc, dir, "-c", clientConf)
	t := benchTarget{
		name: "frp", addr: "127.0.0.1:" + strconv.Itoa(httpPort), host: host, want: http.StatusOK,
		procs: []benchProc{{"frps", server.PID()}, {"frpc", client.PID()}},
	}
	benchWaitAnswered(b, t, server, client)
	return t
}

// benchStartChisel starts a chisel server and a chisel client that shares
// local on a port of the server (reverse mode: the server listens, the
// client dials the handler, as frpc and the relay's agent do), and returns
// the target that sends the load through them.
func benchStartChisel(b *testing.B, chisel, local string) benchTarget {
	b.Helper()
	dir := b.TempDir()
	port, sharedPort := harness.FreePort(b), harness.FreePort(b)
	server := benchStartPeer(b, chisel, dir, "server", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--reverse")
	benchWaitListening(b, server, "chisel server", "127.0.0.1:"+strconv.Itoa(port))
	client := benchStartPeer(b, chisel, dir, "client", "http://127.0.0.1:"+strconv.Itoa(port),
		"R:127.0.0.1:"+strconv.Itoa(sharedPort)+":"+local)
	addr := "127.0.0.1:" + strconv.Itoa(sharedPort)
	t := benchTarget{
		name: "chisel", addr: addr, host: addr, want: http.StatusOK,
		procs: []benchProc{{"chisel-server", server.PID()}, {"chisel-client", client.PID()}},
	}
	benchWaitAnswered(b, t, server, client)
	return t
}

// TestPeersTable checks the figures BenchmarkPeers prints: the framework's
// probe load (fewer requests) is left out, each figure is the median of the
// loads left, and the rows come grouped by concurrency.
func TestPeersTable(t *testing.T) {
	run := func(n int, rps, direct float64, p50 time.Duration, relayCPU, agentCPU time.Duration) (benchRun, benchRun) {
		base := benchRun{res: harness.LoadResult{Requests: n, Elapsed: time.Duration(float64(n) / direct * float64(time.Second)), P50: time.Millisecond}}
		got := benchRun{
			res: harness.LoadResult{Requests: n, Elapsed: time.Duration(float64(n) / rps * float64(time.Second)), P50: p50, P99: 2 * p50},
			cpu: harness.CPUUsage{Wall: time.Second, PerPID: []time.Duration{0, relayCPU, agentCPU}},
		}
		return base, got
	}
	var table peersTable
	for _, l := range []struct {
		c, n        int
		rps, direct float64
		p50         time.Duration
	}{
		{16, 1, 1, 1000, 50 * time.Millisecond}, // the probe: left out
		{16, 1000, 300, 1000, 4 * time.Millisecond},
		{16, 1000, 100, 1000, 2 * time.Millisecond},
		{16, 1000, 200, 1000, 3 * time.Millisecond},
		{1, 1000, 1500, 3000, 2 * time.Millisecond},
	} {
		base, got := run(l.n, l.rps, l.direct, l.p50, 500*time.Millisecond, 200*time.Millisecond)
		table.add("relay-proxy", "relay PROXY Endpoint (relay + agent)", l.c, base, got)
	}
	var out bytes.Buffer
	table.print(&out)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"peers table: each figure the median of the loads of that path at that concurrency ([1 3] loads)",
		"| 1 | relay PROXY Endpoint (relay + agent) | 1 500 | 3 000 | 0.500 | 2.00 | 4.00 | 1.00 | 0.700 (0.500 + 0.200) | 0.0 |",
		"| 16 | relay PROXY Endpoint (relay + agent) | 200 | 1 000 | 0.200 | 3.00 | 6.00 | 2.00 | 0.700 (0.500 + 0.200) | 0.0 |",
	}
	if len(lines) != 5 || lines[0] != want[0] || lines[3] != want[1] || lines[4] != want[2] {
		t.Errorf("table:\n%s\nwant rows:\n%s", out.String(), strings.Join(want, "\n"))
	}
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0"}, {999.6, "1 000"}, {12345, "12 345"}, {1234567, "1 234 567"}} {
		if got := thousands(c.v); got != c.want {
			t.Errorf("thousands(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

// TestPeersTargets checks the verdicts BenchmarkPeers prints for the
// targets: met by the relay, or missed with what the floors reach in the
// same run; a target whose relay row was not measured is left out.
func TestPeersTargets(t *testing.T) {
	load := func(rps float64, over time.Duration, cpu ...time.Duration) (benchRun, benchRun) {
		n := 1000
		base := benchRun{res: harness.LoadResult{Requests: n, Elapsed: time.Second, P50: time.Millisecond}}
		got := benchRun{
			res: harness.LoadResult{Requests: n, Elapsed: time.Duration(float64(n) / rps * float64(time.Second)), P50: time.Millisecond + over},
			cpu: harness.CPUUsage{Wall: time.Second, PerPID: append([]time.Duration{0}, cpu...)},
		}
		return base, got
	}
	var table peersTable
	add := func(key string, c int, rps float64, over time.Duration, cpu ...time.Duration) {
		base, got := load(rps, over, cpu...)
		table.add(key, key, c, base, got)
	}
	// 16 senders: the relay misses 0.12× where both floors reach it, and
	// the CPU target where only the least floor does.
	add("relay-proxy", 16, 100, 0, 200*time.Millisecond, 60*time.Millisecond)
	add("floor-proxy", 16, 150, 0, 130*time.Millisecond, 60*time.Millisecond)
	add("floor-proxy-relay-storage", 16, 130, 0, 200*time.Millisecond, 60*time.Millisecond)
	// One sender: the relay meets the p50 target.
	add("relay-proxy", 1, 100, 500*time.Microsecond, 500*time.Millisecond)
	add("floor-proxy", 1, 100, 400*time.Microsecond, 500*time.Millisecond)
	add("floor-proxy-relay-storage", 1, 100, 400*time.Microsecond, 500*time.Millisecond)
	// The inspector at 64 senders misses 0.45× as both floors do, the
	// least floor by less than three decimals show.
	add("relay-inspector", 64, 400, 0, 100*time.Millisecond)
	add("floor-inspector", 64, 449.7, 0, 50*time.Millisecond)
	add("floor-inspector-relay-storage", 64, 300, 0, 80*time.Millisecond)
	var out bytes.Buffer
	table.printTargets(&out)
	want := []string{
		"| PROXY × direct, 16 senders (≥ 0.12) | 0.100 | 0.150 | 0.130 | no; both floors meet it |",
		"| PROXY CPU-s per 1 000, server + agent, 16 senders (≤ 0.25) | 0.260 | 0.190 | 0.260 | no; beyond the floor with the relay's storage |",
		"| PROXY p50 over direct, one sender (≤ 0.6 ms) | 0.500 | 0.400 | 0.400 | yes |",
		"| inspector × direct, 64 senders (≥ 0.45) | 0.400 | 0.4497 | 0.300 | no; beyond both floors |",
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got := lines[3:]; !slices.Equal(got, want) {
		t.Errorf("targets:\n%s\nwant rows:\n%s", out.String(), strings.Join(want, "\n"))
	}
}

// TestPeersPooledTargets checks the targets read against the run's pooled
// direct loads: a path whose own direct load ran fast reads the median of
// every direct load of its concurrency, not its own, and the CPU targets
// are left out.
func TestPeersPooledTargets(t *testing.T) {
	load := func(rps, direct float64, p50, directP50 time.Duration) (benchRun, benchRun) {
		n := 1000
		base := benchRun{res: harness.LoadResult{Requests: n, Elapsed: time.Duration(float64(n) / direct * float64(time.Second)), P50: directP50}}
		got := benchRun{
			res: harness.LoadResult{Requests: n, Elapsed: time.Duration(float64(n) / rps * float64(time.Second)), P50: p50},
			cpu: harness.CPUUsage{Wall: time.Second, PerPID: []time.Duration{0, 100 * time.Millisecond}},
		}
		return base, got
	}
	var table peersTable
	add := func(key string, c int, rps, direct float64, p50, directP50 time.Duration) {
		base, got := load(rps, direct, p50, directP50)
		table.add(key, key, c, base, got)
	}
	// 64 senders: the relay's own direct load ran at 2 000 req/s, the
	// floors' at 1 000; pooled, every path reads 1 000 (the median of
	// 1 000, 1 000 and 2 000).
	add("relay-proxy", 64, 160, 2000, 0, 0)
	add("floor-proxy", 64, 155, 1000, 0, 0)
	add("floor-proxy-relay-storage", 64, 140, 1000, 0, 0)
	// One sender: the direct p50s of 0.1, 0.2 and 0.3 ms pool to 0.2.
	add("relay-proxy", 1, 100, 1000, 750*time.Microsecond, 100*time.Microsecond)
	add("floor-proxy", 1, 100, 1000, 700*time.Microsecond, 200*time.Microsecond)
	add("floor-proxy-relay-storage", 1, 100, 1000, 900*time.Microsecond, 300*time.Microsecond)
	var per, pooled bytes.Buffer
	table.printTargets(&per)
	table.printPooledTargets(&pooled)
	if !strings.Contains(per.String(), "| PROXY × direct, 64 senders (≥ 0.15) | 0.080 | 0.155 | 0.140 | no; beyond the floor with the relay's storage |") {
		t.Errorf("per-load targets:\n%s", per.String())
	}
	want := []string{
		"| PROXY × direct, 64 senders (≥ 0.15) | 3 | 1 000 (0.00) | 0.160 | 0.155 | 0.140 | yes |",
		"| PROXY p50 over direct, one sender (≤ 0.6 ms) | 3 | 1 000 (0.20) | 0.550 | 0.500 | 0.700 | yes |",
	}
	lines := strings.Split(strings.TrimSpace(pooled.String()), "\n")
	if got := lines[3:]; !slices.Equal(got, want) {
		t.Errorf("pooled targets:\n%s\nwant rows:\n%s", pooled.String(), strings.Join(want, "\n"))
	}
}
