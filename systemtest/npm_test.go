package systemtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// npmPlatform names the host the way npm's os/cpu fields do, or "".
func npmPlatform() string {
	goos := map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32"}[runtime.GOOS]
	cpu := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if goos == "" || cpu == "" {
		return ""
	}
	return goos + "-" + cpu
}

// TestNPMPackageInstallsAndRelays packs the npm packages for this host
// with scripts/npm-pack, installs them offline into an empty folder the
// way a user would, and runs the installed relay: --version names the
// version it was stamped with, and the installed binary serves, runs the
// agent and relays a delivery to a local handler.
func TestNPMPackageInstallsAndRelays(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not on PATH: install Node.js and npm to test the npm package (.ci/run does)")
	}
	platform := npmPlatform()
	if platform == "" {
		t.Skipf("no npm package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	t.Parallel()
	// The harness's build compiles every package as a release build does:
	// once it is done, npm-pack only links.
	harness.Binary(t)
	const version = "0.0.0-systemtest.1"
	dist := t.TempDir()
	pack := harness.Command{Bin: filepath.Join(harness.ModuleRoot(), "scripts", "npm-pack")}
	start := time.Now()
	if out, code := harness.RunWith(t, pack, "--platforms", platform, "--out", dist, version); code != 0 {
		t.Fatalf("scripts/npm-pack exited %d:\n%s", code, out)
	}
	t.Logf("scripts/npm-pack took %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()

	// An empty project, an empty npm cache and --offline: nothing may be
	// fetched, so the install works from the two tarballs alone.
	home := t.TempDir()
	project := filepath.Join(home, "project")
	npmEnv := []string{
		"npm_config_cache=" + filepath.Join(home, "npm-cache"),
		"npm_config_userconfig=" + filepath.Join(home, "npmrc"),
		"npm_config_update_notifier=false",
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"RELAY_SERVER=", "RELAY_TOKEN=",
	}
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	npm := harness.Command{Bin: "npm", Env: npmEnv, Dir: project}
	mainTgz := filepath.Join(dist, "npm", "relayhq-relay-"+version+".tgz")
	platformTgz := filepath.Join(dist, "npm", "relayhq-relay-"+platform+"-"+version+".tgz")
	if out, code := harness.RunWith(t, npm, "install", "--offline", "--no-audit", "--no-fund", mainTgz, platformTgz); code != 0 {
		t.Fatalf("npm install exited %d:\n%s", code, out)
	}

	t.Logf("npm install took %s", time.Since(start).Round(time.Millisecond))
	npx := harness.Command{Bin: "npx", Env: npmEnv, Dir: project}
	out, code := harness.RunWith(t, npx, "relay", "--version")
	if want := "relay " + version + " (commit "; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("npx relay --version exited %d, want a line starting %q:\n%s", code, want, out)
	}

	// The launcher passes the binary's exit code through (2: usage).
	if out, code := harness.RunWith(t, npx, "relay", "retry"); code != 2 {
		t.Errorf("npx relay retry (no id) exited %d, want 2:\n%s", code, out)
	}
	// Without the platform package, the launcher says what is missing.
	bare := filepath.Join(home, "bare")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, code := harness.RunWith(t, harness.Command{Bin: "npm", Env: npmEnv, Dir: bare}, "install", "--offline", "--no-audit", "--no-fund", "--omit=optional", mainTgz); code != 0 {
		t.Fatalf("npm install of the main package alone exited %d:\n%s", code, out)
	}
	out, code = harness.RunWith(t, harness.Command{Bin: "npx", Env: npmEnv, Dir: bare}, "relay", "--version")
	if want := "@relayhq/relay-" + platform + ", which holds the binary for this platform, is not installed"; code != 1 || !strings.Contains(out, want) ||
		!strings.Contains(out, "install its tarball in the\nsame command") {
		t.Errorf("relay without its platform package exited %d, want 1, %q and how to install the platform tarball:\n%s", code, want, out)
	}
	// Both packages carry the license.
	for _, pkg := range []string{"relay", "relay-" + platform} {
		dir := filepath.Join(project, "node_modules", "@relayhq", pkg)
		b, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ License string }
		if err := json.Unmarshal(b, &meta); err != nil || meta.License != "MIT" {
			t.Errorf("%s/package.json: license %q (%v), want MIT", pkg, meta.License, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "LICENSE")); err != nil {
			t.Errorf("%s has no LICENSE: %v", pkg, err)
		}
	}

	// The installed command (the launcher, which runs the platform
	// package's binary) serves, and stops on SIGTERM.
	installed := filepath.Join(project, "node_modules", ".bin", "relay")
	r, err := harness.Launch(installed, t.TempDir())
	if err != nil {
		t.Fatalf("installed relay serve: %v", err)
	}
	t.Cleanup(r.Close)
	acct := signUpTenant(t, r, "npm")
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		fmt.Fprintf(w, "local got %s %s %s", req.Method, req.RequestURI, body)
	}))
	ep := proxyEndpoint(t, r, acct.Token, target, true)
	agent := harness.StartWith(t, harness.Command{Bin: installed, Env: append(npmEnv, "RELAY_TOKEN="+acct.Token)},
		"agent", "--server", "http://127.0.0.1:"+strconv.Itoa(r.Port), "--endpoint", ep.ID, "--target", target)
	waitAgent(t, r, acct.Token, ep.ID, true)

	resp := send(t, r, ep.ID, "POST", "/hooks/npm?x=1", nil, []byte(`{"installed":true}`))
	if want := `local got POST /hooks/npm?x=1 {"installed":true}`; resp.Status != 200 || string(resp.Body) != want {
		t.Fatalf("delivery through the installed relay: %d %q, want 200 %q\nagent:\n%s", resp.Status, resp.Body, want, agent.Output())
	}
}
