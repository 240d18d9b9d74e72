package desktop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// fakeKeyring is an OS credential store in memory; down makes it fail
// like a session without a keyring daemon.
type fakeKeyring struct {
	mu   sync.Mutex
	m    map[string]string
	down bool
}

var errNoDaemon = errors.New("org.freedesktop.secrets was not provided by any .service files")

func (k *fakeKeyring) Get(service, user string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down {
		return "", errNoDaemon
	}
	v, ok := k.m[service+"/"+user]
	if !ok {
		return "", errors.New("secret not found in keyring")
	}
	return v, nil
}

func (k *fakeKeyring) Set(service, user, secret string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down {
		return errNoDaemon
	}
	if k.m == nil {
		k.m = map[string]string{}
	}
	k.m[service+"/"+user] = secret
	return nil
}

func (k *fakeKeyring) Delete(service, user string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down {
		return errNoDaemon
	}
	delete(k.m, service+"/"+user)
	return nil
}

// TestStore: the token goes to the keyring when it answers and then not to
// the file; without a keyring it goes to the file `relay login` writes,
// mode 0600; what `relay login` stored is read either way.
func TestStore(t *testing.T) {
	const server, token = "http://relay.test:8080", "rly_secret"
	tests := []struct {
		name      string
		keyring   *fakeKeyring // nil: none at all
		wantWhere Where
		fileToken bool // the token is in the file
	}{
		{"keyring answers", &fakeKeyring{}, InKeyring, false},
		{"keyring daemon missing", &fakeKeyring{down: true}, InFile, true},
		{"no keyring", nil, InFile, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := LoginFile{path: filepath.Join(t.TempDir(), "relay", "config.json")}
			s := Store{Config: file}
			if tt.keyring != nil {
				s.Keyring = tt.keyring
			}
			where, err := s.Save(Credentials{Server: server, Token: token})
			if err != nil || where != tt.wantWhere {
				t.Fatalf("Save = %q, %v; want %q", where, err, tt.wantWhere)
			}
			b, err := os.ReadFile(file.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), token); got != tt.fileToken {
				t.Errorf("token in file = %v, want %v:\n%s", got, tt.fileToken, b)
			}
			if !strings.Contains(string(b), server) {
				t.Errorf("file lacks the relay's URL:\n%s", b)
			}
			if st, _ := os.Stat(file.path); st.Mode().Perm() != 0o600 {
				t.Errorf("file mode %v, want 0600", st.Mode().Perm())
			}
			c, where, err := s.Load()
			if err != nil || c != (Credentials{Server: server, Token: token}) || where != tt.wantWhere {
				t.Errorf("Load = %+v, %q, %v", c, where, err)
			}
			if err := s.Forget(server); err != nil {
				t.Fatal(err)
			}
			if c, where, _ := s.Load(); c.Token != "" || where != Nowhere || c.Server != server {
				t.Errorf("after Forget: %+v, %q; want the relay kept and no token", c, where)
			}
		})
	}
}

// TestStoreReadsRelayLogin: a token `relay login` put in the file is used
// when the keyring has none for that relay.
func TestStoreReadsRelayLogin(t *testing.T) {
	file := LoginFile{path: filepath.Join(t.TempDir(), "config.json")}
	if err := file.Save(Credentials{Server: "http://h:1", Token: "from-login"}); err != nil {
		t.Fatal(err)
	}
	s := Store{Config: file, Keyring: &fakeKeyring{}}
	c, where, err := s.Load()
	if err != nil || c.Token != "from-login" || where != InFile {
		t.Fatalf("Load = %+v, %q, %v; want relay login's token from the file", c, where, err)
	}
}

// TestStoreKeepsRelayLogin: a sign-in whose token goes to the keyring
// leaves the token `relay login` stored for the same relay in the file, so
// the command line stays logged in; for another relay, the file names the
// new relay and no token.
func TestStoreKeepsRelayLogin(t *testing.T) {
	file := LoginFile{path: filepath.Join(t.TempDir(), "config.json")}
	if err := file.Save(Credentials{Server: "http://h:1", Token: "from-login"}); err != nil {
		t.Fatal(err)
	}
	s := Store{Config: file, Keyring: &fakeKeyring{}}
	if where, err := s.Save(Credentials{Server: "http://h:1/", Token: "from-window"}); err != nil || where != InKeyring {
		t.Fatalf("Save = %q, %v; want it in the keyring", where, err)
	}
	if c, err := file.Load(); err != nil || c.Token != "from-login" {
		t.Fatalf("the file holds %+v, %v after a sign-in to the same relay; want relay login's token kept", c, err)
	}
	if _, err := s.Save(Credentials{Server: "http://other:2", Token: "t2"}); err != nil {
		t.Fatal(err)
	}
	if c, err := file.Load(); err != nil || c != (Credentials{Server: "http://other:2"}) {
		t.Fatalf("the file holds %+v, %v after a sign-in to another relay; want that relay and no token", c, err)
	}
}

// recorder is a Window that keeps the events the app emits.
type recorder struct {
	mu     sync.Mutex
	states []ConnState
}

func (w *recorder) Emit(event string, data any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := data.(ConnState); ok && event == "conn" {
		w.states = append(w.states, s)
	}
}
func (w *recorder) ExecJS(string) {}
func (w *recorder) Show()         {}
func (w *recorder) Hide()         {}
func (w *recorder) Quit()         {}

func (w *recorder) last() ConnState {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.states) == 0 {
		return ConnState{}
	}
	return w.states[len(w.states)-1]
}

// TestRefusedIsShownAndSwitchingOffRecovers: an Endpoint the relay does
// not know is a refusal with its reason, not an endless "connecting";
// switching it off and a good one on connects.
func TestRefusedIsShownAndSwitchingOffRecovers(t *testing.T) {
	r := harness.Start(t, "")
	var out struct {
		SignUp struct{ Token string }
	}
	r.MustGraphQL(t, "", `mutation{ signUp(name: "refused"){ token } }`, nil, &out)

	app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
	w := &recorder{}
	app.Start(t.Context(), w)
	t.Cleanup(app.Shutdown)
	ui := app.Bindings()
	if _, err := ui.SignIn(r.BareURL(), out.SignUp.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := ui.SignIn(r.BareURL(), "rly_wrong"); err == nil {
		t.Error("a token the relay does not know signed in")
	}

	if err := ui.Connect("nosuchendpoint00", "127.0.0.1:9"); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "the refusal", func() bool {
		s := w.last()
		return s.State == StateRefused && strings.Contains(strings.ToLower(s.Reason), "not found")
	})
	if err := ui.Connect("bad target", "example.com:80"); err == nil {
		t.Error("a target off this machine was accepted")
	}
	if err := ui.Disconnect("nosuchendpoint00"); err != nil {
		t.Fatal(err)
	}
	if s := w.last(); s.State != StateOff {
		t.Errorf("after switching the only Endpoint off: %+v", s)
	}

	e, err := ui.CreateEndpoint("ok", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	if err := ui.Connect(e.ID, ""); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "connected", func() bool { return w.last().State == StateConnected })
	eps, err := ui.Endpoints()
	if err != nil || len(eps) != 1 || !eps[0].Serving || eps[0].LocalTarget != "127.0.0.1:9" {
		t.Errorf("Endpoints = %+v, %v", eps, err)
	}
	app.Shutdown()
	if s := w.last(); s.State != StateOff {
		t.Errorf("after Shutdown: %+v, want off (session closed)", s)
	}
}

// TestEndpointsPages: on a relay without a cap on an account's Endpoints
// (--account-endpoints 0) the endpoints list refuses a list without first
// to an account holding more than 1 000, so the window pages with first
// and after: an account of 1 001 Endpoints lists all of them. Before, the
// window showed the refusal and no Endpoint.
func TestEndpointsPages(t *testing.T) {
	r := harness.Start(t, "", "--account-endpoints", "0")
	var out struct {
		SignUp struct{ Token string }
	}
	r.MustGraphQL(t, "", `mutation{ signUp(name: "many"){ token } }`, nil, &out)
	const endpoints = 1001
	var last string
	for i := range endpoints {
		var created struct{ CreateEndpoint struct{ ID string } }
		r.MustGraphQL(t, out.SignUp.Token, `mutation($n: String!){ createEndpoint(input: {name: $n, mode: LOG}){ id } }`,
			map[string]any{"n": fmt.Sprintf("ep%04d", i)}, &created)
		last = created.CreateEndpoint.ID
	}

	app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
	app.Start(t.Context(), &recorder{})
	t.Cleanup(app.Shutdown)
	ui := app.Bindings()
	if _, err := ui.SignIn(r.BareURL(), out.SignUp.Token); err != nil {
		t.Fatal(err)
	}
	eps, err := ui.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != endpoints || eps[len(eps)-1].ID != last {
		t.Errorf("the window lists %d Endpoints, want %d ending with %s", len(eps), endpoints, last)
	}
}
