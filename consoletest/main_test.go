package consoletest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// Shared by every test: one relay process and one browser. Tests isolate
// themselves with their own inspector or account and a fresh browser
// context (own localStorage), which keeps the suite fast.
var (
	relayBin   string
	srv        *harness.Relay
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
	// Every test shares this relay and creates inspectors and accounts
	// from 127.0.0.1: the anonymous rate limit would refuse them. The
	// admin token sets accounts' quotas (usage_test.go).
	srv, err = harness.Launch(relayBin, filepath.Join(tmp, "relay-data"), "--anonymous-rate", "off", "--admin-token", adminToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consoletest:", err)
		return 1
	}
	defer srv.Close()

	stopBrowser, err := startBrowser(ctx, tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, "consoletest:", err)
		return 1
	}
	defer stopBrowser()

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "--- relay log (last 4 KiB) ---\n%s\n", tail(srv.Output(), 4096))
	}
	return code
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
		// The example domains reach the relays on 127.0.0.1: the tests of
		// a console on its own site need two registrable domains of the
		// public suffix list (Chromium takes no Domain cookie under a
		// name it does not know, such as localhost).
		chromedp.Flag("host-resolver-rules", "MAP *.example.com 127.0.0.1, MAP *.example.net 127.0.0.1"),
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

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
