package harness

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Relay is a running `relay serve` process.
type Relay struct {
	Port int
	Data string
	args []string
	bin  string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	// roots is set for a relay serving TLS (StartTLS): the harness then
	// speaks https to it, trusting these.
	roots     *x509.CertPool
	tlsClient *http.Client
}

// FreePort asks the kernel for a free 127.0.0.1 port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// ClosedPort returns a port of 127.0.0.1 that refuses connections for the
// rest of the test: a socket bound to it without listening, so that no
// other test's server can take it meanwhile (as one did a port FreePort
// had given back, and answered in the relay's place).
func ClosedPort(t testing.TB) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("closed port: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("closed port: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("closed port: %v", err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Start runs `relay serve` on a free port with data in dir (t.TempDir() when
// empty) and extra flags, and waits until it answers /healthz.
func Start(t testing.TB, dir string, extra ...string) *Relay {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	r := &Relay{Data: dir, args: extra, bin: Binary(t)}
	r.start(t)
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Launch is Start outside a test (a TestMain): bin is a binary from Build.
// The caller ends the process with Close.
func Launch(bin, dir string, extra ...string) (*Relay, error) {
	r := &Relay{Data: dir, args: extra, bin: bin}
	if err := r.startErr(); err != nil {
		return nil, err
	}
	return r, nil
}

// Close sends SIGTERM, kills the process if it has not ended after 20 s,
// and waits for it.
func (r *Relay) Close() {
	if r.cmd == nil || r.cmd.Process == nil || r.Exited() {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func (r *Relay) start(t testing.TB) {
	t.Helper()
	if err := r.startErr(); err != nil {
		t.Fatal(err)
	}
}

// startErr launches the relay, on a new free port when its own is taken.
func (r *Relay) startErr() error {
	for attempt := 0; attempt < 5; attempt++ {
		if r.Port == 0 || attempt > 0 {
			port, err := freePort()
			if err != nil {
				return err
			}
			r.Port = port
		}
		ok, err := r.launch()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return errors.New("relay could not find a free port")
}

// launch starts `relay serve` on r.Port and waits for it to be healthy. It
// reports false when the port was taken, an error for any other failure.
func (r *Relay) launch() (bool, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:" + strconv.Itoa(r.Port), "--domain", "localhost", "--data", r.Data}, r.args...)
	r.out = &syncBuffer{}
	r.cmd = exec.Command(r.bin, args...)
	r.cmd.Stdout = r.out
	r.cmd.Stderr = r.out
	if err := r.cmd.Start(); err != nil {
		return false, fmt.Errorf("start relay: %w", err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	if r.waitHealthy(30 * time.Second) {
		return true, nil
	}
	_ = r.cmd.Process.Kill()
	<-r.done
	if !bytes.Contains(r.out.Bytes(), []byte("address already in use")) {
		return false, fmt.Errorf("relay did not become healthy:\n%s", r.out.String())
	}
	return false, nil
}

func (r *Relay) waitHealthy(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return false
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, r.BareURL()+"/healthz", nil)
		resp, err := r.client().Do(r.Route(req))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond) // polling a child process's startup, not a test's logic
	}
	return false
}

// Output is everything the process printed so far.
func (r *Relay) Output() string { return r.out.String() }

// BareURL is the console and GraphQL origin, http://localhost:PORT
// (https with TLS), or the --domain the relay was started with.
func (r *Relay) BareURL() string { return r.Scheme() + "://" + r.Domain() + ":" + strconv.Itoa(r.Port) }

// Domain is the relay's --domain: localhost unless its flags name another.
func (r *Relay) Domain() string {
	d := "localhost"
	for i, a := range r.args {
		if a == "--domain" && i+1 < len(r.args) {
			d = r.args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--domain="); ok {
			d = v
		}
	}
	return d
}

// Scheme is https for a relay that serves TLS, else http.
func (r *Relay) Scheme() string {
	if r.roots != nil {
		return "https"
	}
	return "http"
}

// AddressHost is the Host of a public address.
func (r *Relay) AddressHost(id string) string {
	return id + "." + r.Domain() + ":" + strconv.Itoa(r.Port)
}

// Route sends a request for any *.localhost host to this relay's 127.0.0.1
// port, keeping its Host header, so tests need no DNS.
func (r *Relay) Route(req *http.Request) *http.Request {
	if r.roots != nil {
		return req // TLSClient dials the port itself and verifies the name
	}
	req.Host = req.URL.Host
	req.URL.Host = "127.0.0.1:" + strconv.Itoa(r.Port)
	return req
}

// Stop sends SIGTERM and waits for a clean exit.
func (r *Relay) Stop(t testing.TB) {
	t.Helper()
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Errorf("relay did not stop on SIGTERM:\n%s", r.out.String())
	}
}

// Kill ends the process with SIGKILL, as a crash would.
func (r *Relay) Kill(t testing.TB) {
	t.Helper()
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// Restart starts the relay again on the same data folder (and port if free).
func (r *Relay) Restart(t testing.TB) {
	t.Helper()
	r.start(t)
}

// Exited reports whether the process has ended.
func (r *Relay) Exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// ExitCode waits for the process and returns its exit code.
func (r *Relay) ExitCode(ctx context.Context) (int, error) {
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode(), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("relay still running: %w", ctx.Err())
	}
}

// Client is the HTTP client tests use; it never follows redirects.
var Client = &http.Client{
	Timeout:       60 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{MaxIdleConnsPerHost: 128, DisableCompression: true},
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

// PID is the process id of the running relay.
func (r *Relay) PID() int { return r.cmd.Process.Pid }
