package systemtest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// BenchmarkPeers compares three ways of reaching the same local handler
// from a sender with calling it directly, in one run: frp (an http proxy:
// frps → frpc), chisel (a reverse TCP port forward: chisel server → chisel
// client) and the relay's PROXY Endpoint (relay → agent, as BenchmarkProxy).
// The two tunnels record nothing; the relay records every request. Each
// reports its rate as a share of the direct one and the CPU its server and
// client processes spend per 1000 requests.
//
// frps, frpc and chisel are taken from RELAY_PEERS_BIN; scripts/bench-peers
// builds pinned versions of them and runs this benchmark:
//
//	N=5000 scripts/bench-peers
func BenchmarkPeers(b *testing.B) {
	dir := os.Getenv("RELAY_PEERS_BIN")
	if dir == "" {
		b.Skip("RELAY_PEERS_BIN is not set: scripts/bench-peers builds frp and chisel and runs this benchmark")
	}
	frps, frpc, chiselBin := benchPeerBin(b, dir, "frps"), benchPeerBin(b, dir, "frpc"), benchPeerBin(b, dir, "chisel")
	local := benchServer(b, http.StatusOK, benchLocalAnswer)
	direct := benchTarget{name: "direct", addr: local, host: local, want: http.StatusOK}

	b.Run("frp", func(b *testing.B) {
		frp := benchStartFRP(b, frps, frpc, local)
		benchCompare(b, direct, frp, "frp/direct", benchP50Overhead)
	})
	b.Run("chisel", func(b *testing.B) {
		chisel := benchStartChisel(b, chiselBin, local)
		benchCompare(b, direct, chisel, "chisel/direct", benchP50Overhead)
	})
	b.Run("relay-proxy", func(b *testing.B) {
		proxy := benchStartProxy(b, local)
		benchCompare(b, direct, proxy, "proxy/direct", benchP50Overhead)
	})
}

// benchPeerBin is the path of the program name in dir; the benchmark is
// skipped when it is not there.
func benchPeerBin(b *testing.B, dir, name string) string {
	b.Helper()
	path := filepath.Join(dir, name)
	if info, err := os.Stat(path); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		b.Skipf("no %s program in RELAY_PEERS_BIN=%s: scripts/bench-peers builds it", name, dir)
	}
	return path
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
