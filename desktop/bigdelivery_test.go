package desktop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDeliveryWithBigAnswersOpens: a delivery whose attempts were answered
// with several MB each opens in the detail pane, and retries of it answer.
// The pane shows the latest answer (the delivery's response fields) and
// compares attempts on the relay, so the window asks for no attempt's
// stored answer: asking for every one made the answer to an open of the
// delivery, or to a retry, grow by each answer's base64, past the API's
// 32 MiB at the third answer of 8 MB, and past one read of the log at the
// seventh.
func TestDeliveryWithBigAnswersOpens(t *testing.T) {
	const answerSize = 8 << 20
	random := make([]byte, answerSize/2)
	rand.Read(random)
	answer := []byte(hex.EncodeToString(random)) // text that compresses little
	r := harness.Start(t, "")
	var out struct {
		SignUp struct{ Token string }
	}
	r.MustGraphQL(t, "", `mutation{ signUp(name: "big-answers"){ token } }`, nil, &out)
	token := out.SignUp.Token
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(answer)
	}))
	t.Cleanup(local.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(local.URL, "http://"), ":")

	app := New(Options{Store: Store{Config: LoginFile{path: filepath.Join(t.TempDir(), "config.json")}}})
	app.Start(t.Context(), &recorder{})
	t.Cleanup(app.Shutdown)
	ui := app.Bindings()
	if _, err := ui.SignIn(r.BareURL(), token); err != nil {
		t.Fatal(err)
	}
	e, err := ui.CreateEndpoint("big", "localhost:"+port)
	if err != nil {
		t.Fatal(err)
	}
	// Answers are stored only where the Endpoint captures them.
	r.MustGraphQL(t, token, `mutation($id: ID!){ updateEndpoint(id: $id, input: {responseCapture: true}){ id } }`, map[string]any{"id": e.ID}, nil)
	home := t.TempDir()
	harness.StartWith(t, harness.Command{Dir: home, Env: []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "NO_COLOR=1",
		"RELAY_SERVER=", "RELAY_TOKEN=" + token,
	}}, "listen", port, e.ID, "--server", r.BareURL())
	harness.Eventually(t, 15*time.Second, "the listen agent connected", func() bool {
		eps, err := ui.Endpoints()
		return err == nil && len(eps) == 1 && eps[0].AgentConnected
	})
	if resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/big", Host: r.AddressHost(e.ID), Body: []byte(`{}`)}); resp.Status != http.StatusOK {
		t.Fatalf("sender got %d, want the local 200", resp.Status)
	}
	var id string
	harness.Eventually(t, 10*time.Second, "the delivery listed", func() bool {
		var list struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ ID string } }
			}
		}
		r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 1){ nodes{ id } } } }`, map[string]any{"id": e.ID}, &list)
		if n := list.Endpoint.Deliveries.Nodes; len(n) == 1 {
			id = n[0].ID
		}
		return id != ""
	})

	const attempts = 8
	for i := 2; i <= attempts; i++ {
		if _, err := ui.Retry(id, nil); err != nil {
			t.Fatalf("retry %d of a delivery with %d answers of 8 MB: %v", i, i-1, err)
		}
	}
	raw, err := ui.Delivery(id)
	if err != nil {
		t.Fatalf("the detail of a delivery with %d answers of 8 MB: %v", attempts, err)
	}
	var d struct {
		Attempts       []struct{ Status *int }
		ResponseStatus int
		ResponseBody   *string
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != attempts || d.ResponseStatus != http.StatusOK {
		t.Errorf("%d attempts answered %d, want %d answered 200", len(d.Attempts), d.ResponseStatus, attempts)
	}
	// The pane shows the latest answer whole.
	if d.ResponseBody == nil || len(*d.ResponseBody) < answerSize {
		n := 0
		if d.ResponseBody != nil {
			n = len(*d.ResponseBody)
		}
		t.Errorf("the latest answer's body is %d bytes, want the whole %d", n, answerSize)
	}
}
