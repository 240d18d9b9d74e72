package systemtest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestHandshakeSecretsNeverStored: an Endpoint and an inspector are given
// a Meta verify token and a Zoom secret token from files; both handshakes
// are answered as Meta's and Zoom's documentation asks, yet neither secret
// is in any file of the data folder (event log, views), in `relay events
// export` or in the relay's output. The Meta request is recorded with its
// token as REDACTED. A restarted relay reloads its secrets key and still
// answers; a relay given another key says it cannot read the secrets
// instead of answering with a wrong HMAC.
func TestHandshakeSecretsNeverStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir)
	h, acct := loggedInHome(t, r)

	metaSecret, zoomSecret, challenge := "mvt-"+randomHex(t, 12), "zst-"+randomHex(t, 12), randomHex(t, 8)
	files := t.TempDir()
	metaFile, zoomFile := filepath.Join(files, "meta.token"), filepath.Join(files, "zoom.secret")
	for f, s := range map[string]string{metaFile: metaSecret + "\n", zoomFile: zoomSecret + "\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--handshake", "meta,zoom", "--meta-verify-token-file", metaFile, "--zoom-secret-file", zoomFile}
	var ep jsonEndpoint
	h.jsonOut(t, &ep, "endpoints", "create", "secrets", "--mode", "LOG")
	h.jsonOut(t, &ep, append([]string{"endpoints", "update", "secrets"}, flags...)...)
	insp, _ := createInspector(t, r)
	var inspector jsonInspectorAnswer
	h.jsonOut(t, &inspector, append([]string{"inspector", "answer", insp}, flags...)...)
	for _, shown := range []*jsonHandshakes{ep.Handshakes, inspector.Handshakes} {
		if shown == nil || !shown.MetaVerifyTokenSet || !shown.ZoomSecretSet {
			t.Fatalf("handshakes shown as %+v, want both secrets set", shown)
		}
	}
	var api struct {
		Endpoint struct{ Handshakes map[string]any }
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ handshakes{ enabled metaVerifyTokenSet metaVerifyToken zoomSecretSet } } }`,
		map[string]any{"id": ep.ID}, &api)
	if b, _ := json.Marshal(api); strings.Contains(string(b), metaSecret) || strings.Contains(string(b), zoomSecret) ||
		api.Endpoint.Handshakes["metaVerifyTokenSet"] != true {
		t.Fatalf("the API shows %s", b)
	}

	metaTarget := func(path, token string) string {
		return path + "?hub.mode=subscribe&hub.challenge=" + challenge + "&hub.verify_token=" + token
	}
	// handshakes sends both providers' requests to address and checks the
	// answers their documentation asks for.
	handshakes := func(t *testing.T, r *harness.Relay, address, path string) {
		t.Helper()
		if resp := send(t, r, address, "GET", metaTarget(path, metaSecret), nil, nil); resp.Status != 200 || string(resp.Body) != challenge {
			t.Errorf("meta: %d %q, want 200 %q", resp.Status, resp.Body, challenge)
		}
		if resp := send(t, r, address, "GET", metaTarget(path+"-wrong", metaSecret+"x"), nil, nil); resp.Status != 403 {
			t.Errorf("meta with a wrong token: %d %q, want 403", resp.Status, resp.Body)
		}
		plain := randomHex(t, 11)
		resp := send(t, r, address, "POST", path+"-zoom", [][2]string{{"Content-Type", "application/json"}},
			[]byte(`{"payload":{"plainToken":"`+plain+`"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`))
		mac := hmac.New(sha256.New, []byte(zoomSecret))
		mac.Write([]byte(plain))
		want := `{"plainToken":"` + plain + `","encryptedToken":"` + hex.EncodeToString(mac.Sum(nil)) + `"}`
		if resp.Status != 200 || string(resp.Body) != want || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("zoom: %d %q %v, want 200 %s", resp.Status, resp.Body, resp.Header, want)
		}
	}
	handshakes(t, r, ep.ID, "/meta")
	handshakes(t, r, insp, "/meta")

	// The Meta requests are recorded with the token redacted, saying so.
	redacted := metaTarget("/meta", "REDACTED")
	metaID := deliveryAt(t, r, acct.Token, ep.ID, redacted).ID
	explained(t, r, acct.Token, metaID, 200, []string{"Meta verification"}, nil)
	var shown struct {
		Delivery struct {
			Path          string
			RedactedQuery []string
		}
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ delivery(id: $id){ path redactedQuery } }`, map[string]any{"id": metaID}, &shown)
	if shown.Delivery.Path != redacted || strings.Join(shown.Delivery.RedactedQuery, ",") != "hub.verify_token" {
		t.Errorf("the Meta request shows as %+v, want its token redacted and named", shown.Delivery)
	}
	inspectorDeliveryAt(t, r, insp, metaTarget("/meta-wrong", "REDACTED"))
	outputs := r.Output()

	// Restarted, the relay reloads its key and still answers both.
	r.Stop(t)
	r.Restart(t)
	handshakes(t, r, ep.ID, "/again")
	handshakes(t, r, insp, "/again")
	outputs += r.Output()
	r.Stop(t)
	if fi, err := os.Stat(filepath.Join(dir, "secrets.key")); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("secrets key file: %v, %v", fi, err)
	}

	// Given another key, the relay says it cannot read the secrets.
	other := filepath.Join(files, "other.key")
	if err := os.WriteFile(other, []byte(randomHex(t, 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := harness.Start(t, dir, "--secrets-key", other)
	resp := send(t, o, ep.ID, "POST", "/other-zoom", [][2]string{{"Content-Type", "application/json"}},
		[]byte(`{"payload":{"plainToken":"abc"},"event":"endpoint.url_validation"}`))
	if resp.Status != 500 || !strings.Contains(string(resp.Body), "cannot read the address's Zoom secret token") ||
		!strings.Contains(string(resp.Body), "another secrets key") || strings.Contains(string(resp.Body), "encryptedToken") {
		t.Errorf("zoom under another key: %d %q, want a 500 that names the key", resp.Status, resp.Body)
	}
	if resp := send(t, o, insp, "GET", metaTarget("/other-meta", metaSecret), nil, nil); resp.Status != 500 || !strings.Contains(string(resp.Body), "another secrets key") {
		t.Errorf("meta under another key: %d %q, want a 500 that names the key", resp.Status, resp.Body)
	}
	o.Stop(t)
	outputs += o.Output()

	export, code := harness.RunCLI(t, "events", "export", "--data", dir)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	// The searches can find what is there: the forms kept, and the redaction.
	for _, want := range []string{`"meta_verify_token_mac":"hmac-sha256:v1:`, `"zoom_secret_sealed":"aes256gcm:v1:`, "hub.verify_token=REDACTED", `"redacted_query":["hub.verify_token"]`} {
		if !strings.Contains(export, want) {
			t.Errorf("the export holds no %s", want)
		}
	}
	searched := map[string]string{"relay events export": export, "the relay's output": outputs}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		searched[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The search sees what the relay stores: the recorded targets are in
	// both the event log and the views.
	seen := map[string]bool{}
	for name, text := range searched {
		for _, store := range []string{"events.db", "views.db"} {
			if strings.HasPrefix(filepath.Base(name), store) && strings.Contains(text, "hub.challenge="+challenge) {
				seen[store] = true
			}
		}
		for _, secret := range []string{metaSecret, zoomSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the secret %q", name, secret)
			}
		}
	}
	if !seen["events.db"] || !seen["views.db"] {
		t.Errorf("searched %v: the recorded targets were found in %v, want the event log and the views", keys(searched), seen)
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestClusterSharesTheSecretsKey: nodes of one log given the same
// --secrets-key all answer Zoom's validation with the secret set through
// another node; a node with a key of its own says it cannot read it.
func TestClusterSharesTheSecretsKey(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a NATS cluster and three relays")
	}
	seeds, _ := startNATSCluster(t)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(keyFile, []byte(randomHex(t, 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := func(node string, extra ...string) []string {
		return append([]string{"--eventstore", seeds + "?replicas=3", "--bus", seeds, "--node-id", node, "--node-lease", clusterLease}, extra...)
	}
	a := harness.Start(t, "", flags("a", "--secrets-key", keyFile)...)
	b := harness.Start(t, "", flags("b", "--secrets-key", keyFile)...)
	c := harness.Start(t, "", flags("c")...) // its own key, created in its data folder

	zoomSecret := "zst-" + randomHex(t, 12)
	var up struct{ SignUp struct{ Token string } }
	pos := gqlAfter(t, a, "", 0, `mutation{ signUp(name: "keys"){ token } }`, nil, &up)
	token := up.SignUp.Token
	var created struct{ CreateEndpoint struct{ ID string } }
	pos = gqlAfter(t, a, token, pos, `mutation($s: String!){ createEndpoint(input: {name: "zoom", mode: LOG,
		handshakes: {enabled: [ZOOM], zoomSecret: $s}}){ id } }`, map[string]any{"s": zoomSecret}, &created)
	id := created.CreateEndpoint.ID

	plain := randomHex(t, 11)
	body := []byte(`{"payload":{"plainToken":"` + plain + `"},"event":"endpoint.url_validation"}`)
	mac := hmac.New(sha256.New, []byte(zoomSecret))
	mac.Write([]byte(plain))
	want := `{"plainToken":"` + plain + `","encryptedToken":"` + hex.EncodeToString(mac.Sum(nil)) + `"}`
	for _, n := range []struct {
		name string
		r    *harness.Relay
	}{{"a", a}, {"b", b}, {"c", c}} {
		harness.Eventually(t, 10*time.Second, "node "+n.name+"'s views at the Endpoint's creation", func() bool { return viewsReach(t, n.r, token, pos) })
		resp := send(t, n.r, id, "POST", "/zoom", [][2]string{{"Content-Type", "application/json"}}, body)
		switch n.name {
		case "c":
			if resp.Status != 500 || !strings.Contains(string(resp.Body), "another secrets key") {
				t.Errorf("node c, with a key of its own: %d %q, want a 500 naming the key", resp.Status, resp.Body)
			}
		default:
			if resp.Status != 200 || string(resp.Body) != want {
				t.Errorf("node %s: %d %q, want 200 %s", n.name, resp.Status, resp.Body, want)
			}
		}
	}
}
