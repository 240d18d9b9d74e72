package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/ratelimit"
)

// smallOpenQuotas stand in for the open relay's defaults (1 GiB,
// 100/s,burst=1000, which TestServeConfig asserts), too large to reach
// here: 16 KiB holds three deliveries of 4 KiB, and ten deliveries of
// "{}" fit in it.
var smallOpenQuotas = commands.QuotaDefaults{Storage: 16 << 10, Rate: ratelimit.Rate{N: 1, Per: time.Hour, Burst: 10}}

// TestOpenSignupLimitsAccountsByDefault runs `relay serve` with sign-up open
// and no quota flags: an account past the default storage quota is
// answered 507, one past the default rate 429, nothing more recorded; an
// operator's set-quota still lifts the storage quota of one account. With
// --signup invite neither default applies, nor with --account-storage off
// --account-rate off on an open relay.
func TestOpenSignupLimitsAccountsByDefault(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 4<<10)

	t.Run("open", func(t *testing.T) {
		r := startServe(t, "--admin-token", "ops")
		filler, filled := r.signUp(t, "", "filler")
		fillerEP := r.endpoint(t, filler)
		// Each delivery stores more than 4 KiB (the body in base64 and
		// the headers): the fifth at the latest finds the quota used up.
		var statuses []int
		for range 6 {
			statuses = append(statuses, r.deliver(t, fillerEP, big))
		}
		if got := fmt.Sprint(statuses); !regexp.MustCompile(`^\[204( 204){0,3}( 507)+\]$`).MatchString(got) {
			t.Errorf("4 KiB deliveries to an account with the default 16 KiB quota: %s, want 204s then only 507s", got)
		}

		sender, _ := r.signUp(t, "", "sender")
		senderEP := r.endpoint(t, sender)
		statuses = statuses[:0]
		for range 12 {
			statuses = append(statuses, r.deliver(t, senderEP, []byte("{}")))
		}
		if want := "[204 204 204 204 204 204 204 204 204 204 429 429]"; fmt.Sprint(statuses) != want {
			t.Errorf("deliveries past the default rate's burst of 10: %v, want %v", statuses, want)
		}

		// The operator's override of one account wins over the default.
		r.gql(t, "ops", `mutation($a: ID!){ setAccountQuota(account: $a, storage: "off"){ accountId } }`, map[string]any{"a": filled}, nil)
		if s := r.deliver(t, fillerEP, big); s != 204 {
			t.Errorf("after set-quota --storage off: %d, want 204", s)
		}
		// The start logs the quotas in force, after the listening line.
		testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			if !strings.Contains(r.log(), `msg="account quotas" signup=open account_storage="16 KiB" account_storage_from="default with --signup open" account_rate="1/h,burst=10" account_rate_from="default with --signup open"`) {
				return fmt.Errorf("no start line with the quotas in force:\n%s", r.log())
			}
			return nil
		})
	})

	t.Run("restart with an account past the default", func(t *testing.T) {
		dir := t.TempDir()
		r := startServe(t, "--data", dir)
		token, account := r.signUp(t, "", "full")
		ep := r.endpoint(t, token)
		for i := 0; i < 10 && r.deliver(t, ep, big) == http.StatusNoContent; i++ {
		}
		r.stop()
		again := startServe(t, "--data", dir)
		testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			if !regexp.MustCompile(`level=WARN msg="account past the default storage quota: .*" account_id=` + account + ` stored="1\d(\.\d)? KiB" account_storage="16 KiB"`).MatchString(again.log()) {
				return fmt.Errorf("no warning naming account %s at start:\n%s", account, again.log())
			}
			return nil
		})
	})

	t.Run("invite", func(t *testing.T) {
		r := startServe(t, "--signup", "invite", "--admin-token", "ops")
		var inv struct{ CreateInvite struct{ Code string } }
		r.gql(t, "ops", `mutation{ createInvite{ code } }`, nil, &inv)
		token, _ := r.signUp(t, inv.CreateInvite.Code, "trusted")
		r.expectAllRecorded(t, r.endpoint(t, token), big)
	})

	t.Run("open with both off", func(t *testing.T) {
		r := startServe(t, "--account-storage", "off", "--account-rate", "off")
		token, _ := r.signUp(t, "", "lifted")
		r.expectAllRecorded(t, r.endpoint(t, token), big)
	})
}

// servedRelay is a `relay serve` run in this process on 127.0.0.1.
type servedRelay struct {
	base   string // http://127.0.0.1:PORT
	port   string
	stderr *lockedBuffer
	stop   func()       // ends serve and waits for it
	client *http.Client // nil: http.DefaultClient
}

func (r *servedRelay) log() string { return r.stderr.String() }

func (r *servedRelay) httpClient() *http.Client {
	if r.client != nil {
		return r.client
	}
	return http.DefaultClient
}

// startServe parses args as the serve command does (flags, RELAY_* left
// empty, validate), with smallOpenQuotas as the open relay's defaults, and
// serves on a free port of 127.0.0.1 with a data folder of the test's,
// until the test ends.
func startServe(t *testing.T, args ...string) *servedRelay {
	t.Helper()
	return startServeWith(t, nil, args...)
}

// startServeWith is startServe with what no flag sets changed by tune
// (nil: nothing) after the flags are parsed.
func startServeWith(t *testing.T, tune func(*serveConfig), args ...string) *servedRelay {
	t.Helper()
	var c serveConfig
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	c.flags(fs)
	c.openQuotas = smallOpenQuotas
	args = append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--min-free-disk", "off", "--memory-limit", "off"}, args...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := cmdutil.BindEnv(fs, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(&c)
	}
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, c, log, stdout) }()
	r := &servedRelay{stderr: stderr}
	r.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	t.Cleanup(r.stop)
	listening := regexp.MustCompile(`relay listening on 127\.0\.0\.1:(\d+)`)
	var port string
	testwait.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		select {
		case err := <-done:
			t.Fatalf("serve ended before listening: %v\n%s", err, stderr.String())
		default:
		}
		m := listening.FindStringSubmatch(stdout.String())
		if m == nil {
			return fmt.Errorf("not listening yet: %q", stdout.String())
		}
		port = m[1]
		return nil
	})
	r.base, r.port = "http://127.0.0.1:"+port, port
	return r
}

// gql runs one GraphQL operation on the bare domain and fails the test on
// any error; out may be nil.
func (r *servedRelay) gql(t *testing.T, token, query string, vars map[string]any, out any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost:" + r.port
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := r.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Data   json.RawMessage
		Errors []struct{ Message string }
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("%s: %s", query, res.Errors[0].Message)
	}
	if out != nil {
		if err := json.Unmarshal(res.Data, out); err != nil {
			t.Fatal(err)
		}
	}
}

// signUp creates an account (with an invite code unless it is empty) and
// returns its token and id.
func (r *servedRelay) signUp(t *testing.T, invite, name string) (token, account string) {
	t.Helper()
	var out struct {
		SignUp struct {
			Token   string
			Account struct{ ID string }
		}
	}
	vars := map[string]any{"n": name}
	if invite != "" {
		vars["i"] = invite
	}
	r.gql(t, "", `mutation($n: String!, $i: String){ signUp(name: $n, invite: $i){ token account{ id } } }`, vars, &out)
	return out.SignUp.Token, out.SignUp.Account.ID
}

// endpoint creates a LOG Endpoint of the account of token.
func (r *servedRelay) endpoint(t *testing.T, token string) string {
	t.Helper()
	var out struct{ CreateEndpoint struct{ ID string } }
	r.gql(t, token, `mutation{ createEndpoint(input: {name: "hooks", mode: LOG}){ id } }`, nil, &out)
	return out.CreateEndpoint.ID
}

// deliver posts body to the Endpoint's address as a webhook sender would
// and returns the status it got.
func (r *servedRelay) deliver(t *testing.T, id string, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.base+"/hook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = id + ".localhost:" + r.port
	resp, err := r.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode
}

// expectAllRecorded sends twelve deliveries of body, past both of
// smallOpenQuotas, and expects each to be recorded.
func (r *servedRelay) expectAllRecorded(t *testing.T, id string, body []byte) {
	t.Helper()
	for i := range 12 {
		if s := r.deliver(t, id, body); s != http.StatusNoContent {
			t.Fatalf("delivery %d: %d, want 204 (no account quota)", i, s)
		}
	}
}

// lockedBuffer is an io.Writer the relay writes to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
