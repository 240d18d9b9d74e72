package systemtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// cliHome is a user whose os.UserConfigDir is a temp folder, with no
// RELAY_SERVER or RELAY_TOKEN of the test's environment.
type cliHome struct{ dir string }

func newCLIHome(t *testing.T) cliHome {
	t.Helper()
	return cliHome{dir: t.TempDir()}
}

func (h cliHome) command(stdin string) harness.Command {
	c := harness.Command{Env: []string{"HOME=" + h.dir, "XDG_CONFIG_HOME=" + filepath.Join(h.dir, ".config"), "RELAY_SERVER=", "RELAY_TOKEN="}}
	if stdin != "" {
		c.Stdin = strings.NewReader(stdin)
	}
	return c
}

func (h cliHome) run(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	return harness.RunWith(t, h.command(stdin), args...)
}

func (h cliHome) configPath() string { return filepath.Join(h.dir, ".config", "relay", "config.json") }

// stored reads the config file; ok is false when there is none.
func (h cliHome) stored(t *testing.T) (cfg struct{ Server, Token string }, ok bool) {
	t.Helper()
	b, err := os.ReadFile(h.configPath())
	if os.IsNotExist(err) {
		return cfg, false
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("config file: %v\n%s", err, b)
	}
	return cfg, true
}

// TestLoginStoresAToken: login with --signup, with a token on standard
// input, and with a bad token; the stored file is the owner's alone, and
// logout revokes and forgets the token.
func TestLoginStoresAToken(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	server := r.BareURL()
	h := newCLIHome(t)

	out, code := h.run(t, "", "login", "--server", server, "--signup", "alice")
	if code != 0 || !strings.Contains(out, "logged in to "+server) {
		t.Fatalf("login --signup exited %d:\n%s", code, out)
	}
	cfg, ok := h.stored(t)
	if !ok || cfg.Server != server || cfg.Token == "" {
		t.Fatalf("after login --signup the config holds %+v (present %v)", cfg, ok)
	}
	var me struct{ Me *struct{ Name string } }
	r.MustGraphQL(t, cfg.Token, `{ me{ name } }`, nil, &me)
	if me.Me == nil || me.Me.Name != "alice" {
		t.Errorf("the stored token is not alice's: %+v", me.Me)
	}
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{h.configPath(): 0o600, filepath.Dir(h.configPath()): 0o700} {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != want {
				t.Errorf("%s has mode %o, want %o", path, got, want)
			}
		}
	}

	bob := signUpTenant(t, r, "bob")
	for _, args := range [][]string{
		{"login", "--server", server, "--token", "-"},
		{"login", "--server", server}, // standard input is a pipe, not a terminal
	} {
		out, code = h.run(t, bob.Token+"\n", args...)
		if cfg, _ := h.stored(t); code != 0 || cfg.Token != bob.Token {
			t.Fatalf("%v with the token on stdin exited %d, stored %+v:\n%s", args, code, cfg, out)
		}
	}

	// A refused token is not stored, neither over a login nor in a new home.
	out, code = h.run(t, "", "login", "--server", server, "--token", "rly_notatoken")
	if code != 2 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Errorf("login with a bad token exited %d, want 2 naming UNAUTHENTICATED:\n%s", code, out)
	}
	if cfg, _ := h.stored(t); cfg.Token != bob.Token {
		t.Errorf("a refused login replaced the stored token: %+v", cfg)
	}
	fresh := newCLIHome(t)
	if out, code := fresh.run(t, "", "login", "--server", server, "--token", "rly_notatoken"); code != 2 {
		t.Errorf("login with a bad token in a new home exited %d, want 2:\n%s", code, out)
	}
	if _, ok := fresh.stored(t); ok {
		t.Errorf("a refused login wrote %s", fresh.configPath())
	}

	out, code = h.run(t, "", "logout")
	if code != 0 {
		t.Fatalf("logout exited %d:\n%s", code, out)
	}
	if cfg, ok := h.stored(t); !ok || cfg.Token != "" || cfg.Server != server {
		t.Errorf("after logout the config holds %+v (present %v), want the server and no token", cfg, ok)
	}
	if code := r.ErrorCode(t, bob.Token, `{ me{ id } endpoints{ id } }`, nil); code != "UNAUTHENTICATED" {
		t.Errorf("the token logout forgot still works on the relay (%q), want it revoked", code)
	}
	if out, code := h.run(t, "", "retry", unknownDelivery()); code != 2 || !strings.Contains(out, "no token") {
		t.Errorf("retry after logout exited %d, want 2 saying there is no token:\n%s", code, out)
	}
}

// TestRetryWithStoredLogin: after `relay login`, `relay agent` and
// `relay retry` need no --server or --token; retry exits 1 while the local
// handler still answers 502 and 0 once it answers 2xx; an unknown id or a
// bad --token (a flag beats the stored login) is a refusal (2).
func TestRetryWithStoredLogin(t *testing.T) {
	t.Parallel()
	var fixed atomic.Bool
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "owner")
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !fixed.Load() {
			http.Error(w, "upstream down", http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	ep := proxyEndpoint(t, r, acct.Token, target, false)
	h := newCLIHome(t)
	// The IP form of the bare domain: the agent and retry must both take
	// the stored server as given.
	server := "http://127.0.0.1:" + strconv.Itoa(r.Port)
	if out, code := h.run(t, "", "login", "--server", server, "--token", acct.Token); code != 0 {
		t.Fatalf("login exited %d:\n%s", code, out)
	}
	agent := harness.StartWith(t, h.command(""), "agent", "--endpoint", ep.ID, "--target", target)
	harness.Eventually(t, 15*time.Second, "the agent started from the stored login to connect", func() bool {
		e := endpointByID(t, r, acct.Token, ep.ID)
		return e != nil && e.AgentConnected || agent.Exited()
	})
	if agent.Exited() {
		t.Fatalf("relay agent with the stored login ended:\n%s", agent.Output())
	}
	p := &proxyRig{r: r, acct: acct, ep: ep, target: target, agent: agent}
	if resp := p.send(t, "POST", "/hook", nil, []byte("{}")); resp.Status != 502 {
		t.Fatalf("sender got %d, want the local 502", resp.Status)
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/hook")

	out, code := h.run(t, "", "retry", d.ID)
	if code != 1 || !strings.Contains(out, "attempt 2: 502") {
		t.Errorf("retry answered 502 exited %d, want 1 and the attempt printed:\n%s", code, out)
	}
	fixed.Store(true)
	out, code = h.run(t, "", "retry", d.ID)
	if code != 0 || !strings.Contains(out, "attempt 3: 202") {
		t.Errorf("retry answered 202 exited %d, want 0:\n%s", code, out)
	}
	if out, code := h.run(t, "", "retry", unknownDelivery()); code != 2 || !strings.Contains(out, "NOT_FOUND") {
		t.Errorf("retry of an unknown id exited %d, want 2 naming NOT_FOUND:\n%s", code, out)
	}
	// A flag still beats the stored config.
	if out, code := h.run(t, "", "retry", d.ID, "--token", "rly_notatoken"); code != 2 || !strings.Contains(out, "UNAUTHENTICATED") {
		t.Errorf("retry with a bad --token exited %d, want 2 naming UNAUTHENTICATED:\n%s", code, out)
	}
}

// TestNotARelay: a --server that answers HTTP but is no relay is named as
// such, and nothing is stored.
func TestNotARelay(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]http.HandlerFunc{
		"html 404": func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) },
		"empty 200": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
		},
	} {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		home := newCLIHome(t)
		for _, args := range [][]string{
			{"login", "--server", srv.URL, "--token", "t"},
			{"retry", unknownDelivery(), "--server", srv.URL, "--token", "t"},
		} {
			out, code := home.run(t, "", args...)
			if want := "no relay GraphQL API at " + srv.URL; code != 1 || !strings.Contains(out, want) {
				t.Errorf("%s: relay %s exited %d, want 1 and %q:\n%s", name, args[0], code, want, out)
			}
		}
		if _, ok := home.stored(t); ok {
			t.Errorf("%s: login to no relay wrote the config", name)
		}
	}
}

// TestSignUpKeepsAStoredLogin: a second `relay login --signup` for the same
// relay refuses (exit 2, naming the stored account and the ways on) rather
// than replace a token the relay can never show again; --force replaces
// it, and a stored token the relay no longer accepts is no obstacle.
func TestSignUpKeepsAStoredLogin(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	server := r.BareURL()
	h := newCLIHome(t)
	if out, code := h.run(t, "", "login", "--server", server, "--signup", "alice"); code != 0 {
		t.Fatalf("first sign-up exited %d:\n%s", code, out)
	}
	alice, _ := h.stored(t)

	out, code := h.run(t, "", "login", "--server", server, "--signup", "alice2")
	if code != 2 || !strings.Contains(out, "already logged in to "+server+" as alice (") ||
		!strings.Contains(out, "relay logout") || !strings.Contains(out, "--force") {
		t.Errorf("a second sign-up exited %d, want 2 naming alice, relay logout and --force:\n%s", code, out)
	}
	if cfg, _ := h.stored(t); cfg.Token != alice.Token {
		t.Errorf("the refused sign-up replaced the stored token")
	}
	if out, code := h.run(t, "", "login", "--server", server, "--signup", "alice3", "--force"); code != 0 {
		t.Fatalf("sign-up with --force exited %d:\n%s", code, out)
	}
	if cfg, _ := h.stored(t); cfg.Token == alice.Token || cfg.Token == "" {
		t.Errorf("--force did not store the new account's token")
	}

	// A stored token the relay refuses is replaced without --force.
	stale := newCLIHome(t)
	if err := os.MkdirAll(filepath.Dir(stale.configPath()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale.configPath(), []byte(`{"server":"`+server+`","token":"rly_notatoken"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// --server without a scheme means http on this machine.
	if out, code := stale.run(t, "", "login", "--server", strings.TrimPrefix(server, "http://"), "--signup", "carol"); code != 0 {
		t.Errorf("sign-up over a refused stored token exited %d:\n%s", code, out)
	}

	// A refused token says which relay refused it and what to do.
	out, code = newCLIHome(t).run(t, "", "listen", "3000", "--server", server, "--token", "rly_notatoken")
	if want := "token refused by " + server; code != 2 || !strings.Contains(out, want) || !strings.Contains(out, "relay login") {
		t.Errorf("listen with a bad token exited %d, want 2 with %q and relay login:\n%s", code, want, out)
	}
}
