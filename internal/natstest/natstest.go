// Package natstest runs a NATS server with JetStream inside a test process,
// on 127.0.0.1 and a random port, storing in a temporary folder, so the
// JetStream event log adapter and the system tests need no server installed.
// Only tests import it: the relay binary does not contain a NATS server.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an embedded NATS server with JetStream enabled.
type Server struct {
	t    testing.TB
	dir  string
	port int
	srv  *server.Server
}

// readyLimit bounds a start; a safety net, not a timing assertion.
const readyLimit = 20 * time.Second

// Start runs a server for the rest of the test.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), port: server.RANDOM_PORT}
	s.start()
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      s.port,
		JetStream: true,
		StoreDir:  s.dir,
		NoSigs:    true,
		NoLog:     true,
		// Small limits keep the server's memory modest in tests.
		JetStreamMaxMemory: 64 << 20,
		JetStreamMaxStore:  1 << 30,
	})
	if err != nil {
		s.t.Fatalf("nats server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyLimit) {
		srv.Shutdown()
		s.t.Fatalf("nats server not ready after %s", readyLimit)
	}
	s.srv = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
}

// URL is the client URL, nats://127.0.0.1:PORT; it stays the same across
// restarts.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Restart stops the server and starts it again on the same port and store
// folder, as after a process restart.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.start()
}

// Shutdown stops the server; calling it again does nothing.
func (s *Server) Shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Cluster is a JetStream cluster of embedded servers, each on its own
// random client port and store folder, routed to each other on 127.0.0.1.
type Cluster struct {
	Servers []*server.Server
}

// StartCluster runs n servers for the rest of the test and returns once
// the cluster has elected its JetStream meta leader and that leader counts
// every server as an online peer: before that, creating a replicated stream
// can fail with "no suitable peers for placement".
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	// The route ports are picked free and then bound by the servers, so a
	// test running beside this one may take one in between; the servers
	// then never get ready (seen under the full parallel run). A start that
	// does not get ready is retried on new ports.
	var c *Cluster
	for try := 1; c == nil; try++ {
		var err error
		if c, err = startCluster(t, n); err != nil {
			if try == 3 {
				t.Fatalf("start a cluster of %d: %v", n, err)
			}
			t.Logf("start a cluster of %d (try %d): %v; trying other ports", n, try, err)
		}
	}
	// Poll for the meta leader and its peers: streams cannot be placed
	// before then.
	deadline := time.Now().Add(readyLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !c.ready() {
		if time.Now().After(deadline) {
			t.Fatalf("no JetStream meta leader with %d online peers after %s", n, readyLimit)
		}
		<-tick.C
	}
	return c
}

// startCluster starts n routed servers and waits until each is ready for
// connections; on failure it shuts down what it started.
func startCluster(t testing.TB, n int) (*Cluster, error) {
	t.Helper()
	routePorts := make([]int, n)
	for i := range routePorts {
		routePorts[i] = freePort(t)
	}
	var routes []*url.URL
	for _, p := range routePorts {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &Cluster{}
	shutdown := func() {
		for _, srv := range c.Servers {
			srv.Shutdown()
			srv.WaitForShutdown()
		}
	}
	for i := range n {
		srv, err := server.NewServer(&server.Options{
			ServerName:         fmt.Sprintf("n%d", i+1),
			Host:               "127.0.0.1",
			Port:               server.RANDOM_PORT,
			JetStream:          true,
			StoreDir:           t.TempDir(),
			NoSigs:             true,
			NoLog:              true,
			Cluster:            server.ClusterOpts{Name: "relay-test", Host: "127.0.0.1", Port: routePorts[i]},
			Routes:             routes,
			JetStreamMaxMemory: 64 << 20,
			JetStreamMaxStore:  1 << 30,
		})
		if err != nil {
			shutdown()
			return nil, fmt.Errorf("nats server %d: %w", i+1, err)
		}
		srv.Start()
		c.Servers = append(c.Servers, srv)
	}
	// All are started before any is waited for, so no server waits on
	// routes that lead nowhere yet.
	for i, srv := range c.Servers {
		if !srv.ReadyForConnections(readyLimit) {
			shutdown()
			return nil, fmt.Errorf("nats server %d not ready after %s (its route port %d may have been taken)", i+1, readyLimit, routePorts[i])
		}
	}
	t.Cleanup(shutdown)
	return c, nil
}

// ready reports whether a meta leader sees every server online.
func (c *Cluster) ready() bool {
	for _, s := range c.Servers {
		if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == len(c.Servers) {
			return true
		}
	}
	return false
}

// URL lists every server's client URL, comma-separated, as cluster seeds.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", s.Addr().(*net.TCPAddr).Port)
	}
	return strings.Join(urls, ",")
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
