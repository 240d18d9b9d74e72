package consoletest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// Shared by every test: one relay process and one browser. Tests isolate
// themselves with their own inspector or account and a fresh browser
// context (own localStorage), which keeps the suite fast.
var (
	relayBin   string
	srv        *relayServer
	browserCtx context.Context // nil when no browser is available
	noBrowser  string          // why browserCtx is nil
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "consoletest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "consoletest:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	// Built once by the harness, as for the system tests; removed at the end.
	relayBin, err = harness.Build()
	defer harness.RemoveBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "consoletest:", err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err = startRelay(ctx, relayBin, tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consoletest:", err)
		return 1
	}
	defer srv.stop()

	stopBrowser, err := startBrowser(ctx, tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consoletest:", err)
		return 1
	}
	defer stopBrowser()

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- relay log (last 4 KiB) ---\n%s\n", srv.logTail(4096))
	}
	return code
}

// relayServer is a `relay serve` child process.
type relayServer struct {
	cmd  *exec.Cmd
	port int
	log  *lockedBuffer
	done chan struct{}
}

// bare is the console's origin as the browser sees it.
func (r *relayServer) bare() string { return fmt.Sprintf("http://localhost:%d", r.port) }

// addr is where Go code connects; Host headers pick the virtual host.
func (r *relayServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

func startRelay(ctx context.Context, bin, tmp string) (*relayServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(tmp, "relay-data")
	r := &relayServer{port: port, log: &lockedBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(bin, "serve", "--listen", r.addr(), "--domain", "localhost", "--data", data)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start relay: %w", err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	if err := waitHealthy(ctx, r, 60*time.Second); err != nil {
		r.stop()
		return nil, fmt.Errorf("relay did not become healthy: %w\n%s", err, r.logTail(4096))
	}
	return r, nil
}

func (r *relayServer) stop() {
	if r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

func (r *relayServer) logTail(n int) string { return r.log.tail(n) }

// lockedBuffer collects a child's output while tests read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail returns the last n bytes written.
func (b *lockedBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// waitHealthy polls /healthz on the bare host until it answers 200.
func waitHealthy(ctx context.Context, r *relayServer, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr()+"/healthz", nil)
		if err != nil {
			return err
		}
		req.Host = fmt.Sprintf("localhost:%d", r.port)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-r.done:
			return errors.New("relay exited")
		case <-ctx.Done():
			return fmt.Errorf("last error %v: %w", err, ctx.Err())
		case <-tick.C:
		}
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// startBrowser launches one headless Chromium for the whole run.
func startBrowser(ctx context.Context, tmp string) (func(), error) {
	path := chromiumPath()
	if _, err := os.Stat(path); err != nil {
		noBrowser = fmt.Sprintf("no Chromium at %s: %v", path, err)
		return func() {}, nil
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(filepath.Join(tmp, "chromium-profile")),
		chromedp.WindowSize(1280, 800),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	// Start the browser now, so tests can open isolated browser contexts.
	if err := chromedp.Do(bctx); err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, fmt.Errorf("start Chromium: %w", err)
	}
	browserCtx = bctx
	return func() {
		cancelBrowser()
		cancelAlloc()
	}, nil
}
