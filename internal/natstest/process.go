package natstest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// ServerBinary is where Debian's nats-server package installs the server.
const ServerBinary = "/usr/sbin/nats-server"

// ProcessCluster is a JetStream cluster of nats-server processes, each on
// its own free ports and store folder, routed to each other on 127.0.0.1.
// Unlike Cluster, a server in it can die as a process does: Kill sends it
// SIGKILL, so it closes nothing and flushes nothing.
type ProcessCluster struct {
	t     testing.TB
	procs []*serverProcess
}

type serverProcess struct {
	name       string
	clientPort int
	cmd        *exec.Cmd
	log        string // its output, for a failure's message
	exited     chan struct{}
}

// StartProcessCluster runs n nats-server processes from ServerBinary for
// the rest of the test and returns once every one answers its health
// check with JetStream enabled and a stream with n replicas can be
// created. t.Cleanup kills the processes it started, by their PIDs.
func StartProcessCluster(t testing.TB, n int) *ProcessCluster {
	t.Helper()
	if _, err := os.Stat(ServerBinary); err != nil {
		t.Fatalf("nats-server processes: %v", err)
	}
	// As in StartCluster: ports are picked free and then bound by the
	// servers, so a test beside this one may take one in between. A start
	// that does not get ready is retried on new ports.
	for try := 1; ; try++ {
		c, err := startProcessCluster(t, n)
		if err == nil {
			return c
		}
		if try == 3 {
			t.Fatalf("start %d nats-server processes: %v", n, err)
		}
		t.Logf("start %d nats-server processes (try %d): %v; trying other ports", n, try, err)
	}
}

func startProcessCluster(t testing.TB, n int) (*ProcessCluster, error) {
	t.Helper()
	c := &ProcessCluster{t: t}
	routePorts := make([]int, n)
	var routes []string
	for i := range routePorts {
		routePorts[i] = freePort(t)
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]))
	}
	monitorPorts := make([]int, n)
	for i := range n {
		dir := t.TempDir()
		p := &serverProcess{name: fmt.Sprintf("n%d", i+1), clientPort: freePort(t), log: filepath.Join(dir, "nats-server.log"), exited: make(chan struct{})}
		monitorPorts[i] = freePort(t)
		conf := fmt.Sprintf(`server_name: %s
listen: "127.0.0.1:%d"
http: "127.0.0.1:%d"
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
}
cluster {
  name: relay-test
  listen: "127.0.0.1:%d"
  routes: [%s]
}
`, p.name, p.clientPort, monitorPorts[i], filepath.Join(dir, "store"), routePorts[i], strings.Join(routes, ", "))
		confPath := filepath.Join(dir, "nats-server.conf")
		if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
			c.killAll()
			return nil, err
		}
		out, err := os.Create(p.log)
		if err != nil {
			c.killAll()
			return nil, err
		}
		p.cmd = exec.Command(ServerBinary, "-c", confPath)
		p.cmd.Stdout, p.cmd.Stderr = out, out
		if err := p.cmd.Start(); err != nil {
			out.Close()
			c.killAll()
			return nil, fmt.Errorf("start %s: %w", p.name, err)
		}
		go func() { _ = p.cmd.Wait(); out.Close(); close(p.exited) }()
		c.procs = append(c.procs, p)
	}
	if err := c.waitReady(monitorPorts); err != nil {
		c.killAll()
		return nil, err
	}
	t.Cleanup(c.killAll)
	return c, nil
}

// waitReady polls each server's /healthz?js-enabled-only=true, then the
// creation of a stream with one replica on each server: before the
// JetStream meta leader counts every server as a peer, that fails with
// "no suitable peers for placement".
func (c *ProcessCluster) waitReady(monitorPorts []int) error {
	deadline := time.Now().Add(readyLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: time.Second}
	healthy := func(port int) bool {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", port))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for i, port := range monitorPorts {
		for !healthy(port) {
			if err := c.exitedEarly(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not healthy after %s (a port of it may have been taken):\n%s", c.procs[i].name, readyLimit, c.tail(i))
			}
			<-tick.C
		}
	}
	nc, err := nats.Connect(c.URL(), nats.Timeout(time.Second))
	if err != nil {
		return fmt.Errorf("connect to the cluster: %w", err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(2 * time.Second))
	if err != nil {
		return err
	}
	cfg := &nats.StreamConfig{Name: "NATSTEST_READY", Subjects: []string{"natstest.ready"}, Replicas: len(c.procs), Storage: nats.MemoryStorage}
	for {
		_, err := js.AddStream(cfg)
		if err == nil {
			if err := js.DeleteStream(cfg.Name); err != nil {
				return fmt.Errorf("delete the readiness stream: %w", err)
			}
			return nil
		}
		if err := c.exitedEarly(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no stream with %d replicas after %s: %w", len(c.procs), readyLimit, err)
		}
		<-tick.C
	}
}

func (c *ProcessCluster) exitedEarly() error {
	for i, p := range c.procs {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v):\n%s", p.name, p.cmd.ProcessState, c.tail(i))
		default:
		}
	}
	return nil
}

// tail is the end of server i's output.
func (c *ProcessCluster) tail(i int) string {
	b, _ := os.ReadFile(c.procs[i].log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// URL lists every server's client URL, comma-separated, as cluster seeds;
// a killed server stays in it (clients skip it).
func (c *ProcessCluster) URL() string {
	urls := make([]string, len(c.procs))
	for i, p := range c.procs {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", p.clientPort)
	}
	return strings.Join(urls, ",")
}

// PID is the process ID of server i.
func (c *ProcessCluster) PID(i int) int { return c.procs[i].cmd.Process.Pid }

// Kill sends SIGKILL to server i (the process this cluster started) and
// waits until it has exited.
func (c *ProcessCluster) Kill(i int) {
	c.t.Helper()
	p := c.procs[i]
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Fatalf("kill -9 %s (pid %d): %v", p.name, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
	case <-time.After(readyLimit):
		c.t.Fatalf("%s (pid %d) still running %s after SIGKILL", p.name, p.cmd.Process.Pid, readyLimit)
	}
}

// killAll kills every process this cluster started, by PID, and waits for
// them; ones already gone are skipped.
func (c *ProcessCluster) killAll() {
	for _, p := range c.procs {
		select {
		case <-p.exited:
			continue
		default:
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
