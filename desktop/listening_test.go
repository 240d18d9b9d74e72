package desktop

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// listening is a signed-in window beside a real relay, with an Endpoint
// it created and a relay listen agent forwarding it to a local handler.
type listening struct {
	r        *harness.Relay
	token    string
	ui       *UI
	endpoint Endpoint
}

// startListening signs up account on a real relay, signs the window in,
// creates Endpoint name to forward to local, lets setup change it over the
// API (nil: none), and starts relay listen for it with listenArgs and env
// added, waiting until the agent is connected.
func startListening(t *testing.T, account, name string, local http.Handler, setup func(l *listening), env []string, listenArgs ...string) *listening {
	t.Helper()
	r := harness.Start(t, "")
	var out struct {
		SignUp struct{ Token string }
	}
	r.MustGraphQL(t, "", `mutation($n: String!){ signUp(name: $n){ token } }`, map[string]any{"n": account}, &out)
	srv := httptest.NewServer(local)
	t.Cleanup(srv.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")

	app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
	app.Start(t.Context(), &recorder{})
	t.Cleanup(app.Shutdown)
	l := &listening{r: r, token: out.SignUp.Token, ui: app.Bindings()}
	if _, err := l.ui.SignIn(r.BareURL(), l.token); err != nil {
		t.Fatal(err)
	}
	e, err := l.ui.CreateEndpoint(name, "localhost:"+port)
	if err != nil {
		t.Fatal(err)
	}
	l.endpoint = e
	if setup != nil {
		setup(l)
	}
	home := t.TempDir()
	harness.StartWith(t, harness.Command{Dir: home, Env: append([]string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "NO_COLOR=1",
		"RELAY_SERVER=", "RELAY_TOKEN=" + l.token,
	}, env...)}, append([]string{"listen", port, e.ID, "--server", r.BareURL()}, listenArgs...)...)
	harness.Eventually(t, 15*time.Second, "the listen agent connected", func() bool {
		eps, err := l.ui.Endpoints()
		return err == nil && len(eps) == 1 && eps[0].AgentConnected
	})
	return l
}

// latestDelivery is the id of the Endpoint's latest delivery, once the
// views list it (a moment after the sender's answer).
func (l *listening) latestDelivery(t *testing.T) string {
	t.Helper()
	var id string
	harness.Eventually(t, 10*time.Second, "the delivery listed", func() bool {
		var list struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ ID string } }
			}
		}
		l.r.MustGraphQL(t, l.token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 1){ nodes{ id } } } }`, map[string]any{"id": l.endpoint.ID}, &list)
		if n := list.Endpoint.Deliveries.Nodes; len(n) == 1 {
			id = n[0].ID
		}
		return id != ""
	})
	return id
}
