package systemtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

var publicURLLine = regexp.MustCompile(`public URL http://([a-z0-9-]+)\.localhost:\d+/ →`)

// loggedInHome is a CLI user logged in to r with a new account.
func loggedInHome(t *testing.T, r *harness.Relay) (cliHome, tenant) {
	t.Helper()
	acct := signUpTenant(t, r, "cli")
	h := newCLIHome(t)
	if out, code := h.run(t, "", "login", "--server", "http://127.0.0.1:"+strconv.Itoa(r.Port), "--token", acct.Token); code != 0 {
		t.Fatalf("login exited %d:\n%s", code, out)
	}
	return h, acct
}

// startIn runs the relay command in folder dir of home h until the test ends.
func (h cliHome) startIn(t *testing.T, dir string, args ...string) *harness.Process {
	t.Helper()
	c := h.command("")
	c.Dir = dir
	c.Env = append(c.Env, "NO_COLOR=1")
	return harness.StartWith(t, c, args...)
}

// waitOutput waits until p printed a match of re and returns its groups.
func waitOutput(t *testing.T, p *harness.Process, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	harness.Eventually(t, 15*time.Second, "output matching "+re.String(), func() bool {
		m = re.FindStringSubmatch(p.Output())
		if m == nil && p.Exited() {
			t.Fatalf("the command ended:\n%s", p.Output())
		}
		return m != nil
	})
	return m
}

// recordingTarget is a local server recording what it gets, answering
// 200 "ok"; it returns the log and the port.
func recordingTarget(t *testing.T) (*requestLog, string) {
	t.Helper()
	log := &requestLog{}
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		log.add(r, body)
		io.WriteString(w, "ok")
	}))
	_, port, _ := strings.Cut(target, ":")
	return log, port
}

// TestListenWithPortAndPrefix: `relay listen PORT` in a folder creates an
// Endpoint named after it in PROXY mode, prints its public URL and a line
// per request with the delivery id; Ctrl-C ends it with exit code 0 and
// the relay records the disconnect. `relay listen URL NAME` reuses that
// Endpoint and puts the URL's path in front of the recorded one.
func TestListenWithPortAndPrefix(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	project := filepath.Join(h.dir, "shop")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}

	listen := h.startIn(t, project, "listen", port)
	id := waitOutput(t, listen, publicURLLine)[1]
	ep := endpointByID(t, r, acct.Token, id)
	if ep == nil || ep.Name != "shop" || ep.Mode != "PROXY" || strp(ep.Target) != strconv.Quote("localhost:"+port) {
		t.Fatalf("listen's Endpoint is %+v, want shop in PROXY mode to localhost:%s", ep, port)
	}
	waitAgent(t, r, acct.Token, id, true)
	if resp := send(t, r, id, "POST", "/hook?a=1", nil, []byte(`{"n":1}`)); resp.Status != 200 || string(resp.Body) != "ok" {
		t.Fatalf("sender got %d %q, want the local 200 ok", resp.Status, resp.Body)
	}
	if got := seen.last(t); got.RequestURI != "/hook?a=1" || string(got.Body) != `{"n":1}` {
		t.Errorf("local server got %s %q", got.RequestURI, got.Body)
	}
	d := deliveryAt(t, r, acct.Token, id, "/hook?a=1")
	waitOutput(t, listen, regexp.MustCompile(`\d\d:\d\d:\d\d POST /hook\?a=1 → 200 \(\d+ ms\)  delivery `+regexp.QuoteMeta(d.ID)))

	if err := listen.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "listen to end on Ctrl-C", listen.Exited)
	if _, code := listen.ExitCode(); code != 0 {
		t.Errorf("listen exited %d on Ctrl-C, want 0:\n%s", code, listen.Output())
	}
	harness.Eventually(t, 15*time.Second, "the disconnect in the log", func() bool {
		// The session's start and end; PrimaryChanged events come between.
		var types []string
		for _, typ := range streamTypes(logEvents(t, r, acct.Token), "agent-"+id) {
			if typ != "listener.primary_changed.v1" {
				types = append(types, typ)
			}
		}
		return len(types) == 2 && types[1] == "agent.disconnected.v1"
	})

	// By name, with a URL whose path prefixes the recorded one.
	listen = h.startIn(t, t.TempDir(), "listen", "http://localhost:"+port+"/api/", "shop")
	if again := waitOutput(t, listen, publicURLLine)[1]; again != id {
		t.Fatalf("listen shop served %s, want the Endpoint %s", again, id)
	}
	waitAgent(t, r, acct.Token, id, true)
	send(t, r, id, "POST", "/hook//x?y=%2F", nil, []byte("x"))
	if got := seen.last(t); got.RequestURI != "/api/hook//x?y=%2F" {
		t.Errorf("local server got %q, want the prefix in front of the recorded path", got.RequestURI)
	}
	var list struct{ Endpoints []struct{ ID string } }
	r.MustGraphQL(t, acct.Token, `{ endpoints{ id } }`, nil, &list)
	if len(list.Endpoints) != 1 {
		t.Errorf("%d endpoints after two listens, want the one reused", len(list.Endpoints))
	}
}

// TestAgentServesSeveralEndpointsOverOneConnection: `relay agent
// --endpoint A=T1 --endpoint B=T2` serves both over one WebSocket: one
// connection line, both Endpoints show one agent, the relay's sessions
// of both name the same connection, and each Endpoint's requests reach
// its own target.
func TestAgentServesSeveralEndpointsOverOneConnection(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seenA, portA := recordingTarget(t)
	seenB, portB := recordingTarget(t)
	a := createEndpointFor(t, r, acct.Token, map[string]any{"name": "stripe", "mode": "PROXY", "target": "127.0.0.1:" + portA})
	b := createEndpointFor(t, r, acct.Token, map[string]any{"name": "github", "mode": "PROXY", "target": "127.0.0.1:" + portB})

	agent := h.startIn(t, t.TempDir(), "agent", "--endpoint", a.ID+"="+portA, "--endpoint", b.ID+"=http://localhost:"+portB+"/gh")
	waitAgent(t, r, acct.Token, a.ID, true)
	waitAgent(t, r, acct.Token, b.ID, true)
	for _, id := range []string{a.ID, b.ID} {
		var out struct{ Endpoint struct{ AgentCount int } }
		r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ agentCount } }`, map[string]any{"id": id}, &out)
		if out.Endpoint.AgentCount != 1 {
			t.Errorf("endpoint %s counts %d agents, want 1", id, out.Endpoint.AgentCount)
		}
	}
	// The agent announces its connection once the relay lists its
	// sessions, which may be a moment after the Endpoints show them.
	waitOutput(t, agent, regexp.MustCompile(`forwarding 2 endpoints over one connection`))
	if out := agent.Output(); strings.Count(out, "connected to ") != 1 || !strings.Contains(out, "forwarding 2 endpoints over one connection") {
		t.Errorf("agent output, want one connection for two endpoints:\n%s", out)
	}
	// The relay names each session <connection>/<endpoint>.
	conns := map[string]bool{}
	for _, e := range logEvents(t, r, acct.Token) {
		if e.Type != "agent.connected.v1" {
			continue
		}
		var v struct {
			AgentID string `json:"agent_id"`
		}
		json.Unmarshal([]byte(e.Data), &v)
		conn, _, _ := strings.Cut(v.AgentID, "/")
		conns[conn] = true
	}
	if len(conns) != 1 {
		t.Errorf("the sessions name %d connections (%v), want 1", len(conns), conns)
	}

	send(t, r, a.ID, "POST", "/pay", nil, []byte("a"))
	send(t, r, b.ID, "POST", "/push", nil, []byte("b"))
	if got := seenA.last(t); got.RequestURI != "/pay" || string(got.Body) != "a" {
		t.Errorf("stripe's target got %q %q", got.RequestURI, got.Body)
	}
	if got := seenB.last(t); got.RequestURI != "/gh/push" || string(got.Body) != "b" {
		t.Errorf("github's target got %q %q", got.RequestURI, got.Body)
	}
	waitOutput(t, agent, regexp.MustCompile(`\[github\] POST /push → 200`))
	agent.Stop(t)
	waitAgent(t, r, acct.Token, a.ID, false)

	// relay listen PORT NAME NAME: the same, by names, one target for both.
	listen := h.startIn(t, t.TempDir(), "listen", portA, "stripe", "github")
	waitOutput(t, listen, regexp.MustCompile(`forwarding 2 endpoints over one connection`))
	waitAgent(t, r, acct.Token, a.ID, true)
	waitAgent(t, r, acct.Token, b.ID, true)
	send(t, r, b.ID, "POST", "/push2", nil, []byte("b2"))
	if got := seenA.last(t); got.RequestURI != "/push2" {
		t.Errorf("listen %s stripe github: the shared target got %q", portA, got.RequestURI)
	}
	if ep := endpointByID(t, r, acct.Token, b.ID); ep == nil || strp(ep.Target) != strconv.Quote("localhost:"+portA) {
		t.Errorf("github's stored target after listen: %+v", ep)
	}
}

// TestListenHTTPSTarget: an https target on loopback with a self-signed
// certificate is refused (502) without --insecure and reached with it.
func TestListenHTTPSTarget(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.WriteString(w, "tls "+req.URL.Path)
	}))
	t.Cleanup(srv.Close)
	target := srv.URL // https://127.0.0.1:PORT

	listen := h.startIn(t, t.TempDir(), "listen", target)
	id := waitOutput(t, listen, publicURLLine)[1]
	waitAgent(t, r, acct.Token, id, true)
	if resp := send(t, r, id, "GET", "/x", nil, nil); resp.Status != 502 {
		t.Errorf("self-signed target without --insecure: %d %q, want 502", resp.Status, resp.Body)
	}
	listen.Stop(t)
	waitAgent(t, r, acct.Token, id, false)

	listen = h.startIn(t, t.TempDir(), "listen", target, id, "--insecure")
	waitOutput(t, listen, publicURLLine)
	waitAgent(t, r, acct.Token, id, true)
	if resp := send(t, r, id, "GET", "/x", nil, nil); resp.Status != 200 || string(resp.Body) != "tls /x" {
		t.Errorf("with --insecure: %d %q, want 200 from the TLS server", resp.Status, resp.Body)
	}
}

// The -o json shapes, as docs/cli.md documents them; decoding rejects
// unknown fields, so a shape that grows shows here.
type (
	jsonEndpoint struct {
		ID              string          `json:"id"`
		Name            string          `json:"name"`
		URL             string          `json:"url"`
		Mode            string          `json:"mode"`
		Target          *string         `json:"target"`
		ResponseCapture bool            `json:"responseCapture"`
		AgentConnected  bool            `json:"agentConnected"`
		AgentCount      int             `json:"agentCount"`
		CreatedAt       string          `json:"createdAt"`
		Answer          *jsonAnswer     `json:"answer"`
		Handshakes      *jsonHandshakes `json:"handshakes"`
		Filters         []struct {
			Text string `json:"text"`
		} `json:"filters"`
		Retention *struct {
			Window        string  `json:"window"`
			Seconds       int64   `json:"seconds"`
			IsDefault     bool    `json:"isDefault"`
			Max           string  `json:"max"`
			DeletedBefore *string `json:"deletedBefore"`
		} `json:"retention"`
	}
	jsonAnswer struct {
		Status  int `json:"status"`
		Headers []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"headers"`
		Body string `json:"body"`
	}
	jsonHandshakes struct {
		Enabled            []string `json:"enabled"`
		MetaVerifyTokenSet bool     `json:"metaVerifyTokenSet"`
		ZoomSecretSet      bool     `json:"zoomSecretSet"`
		InProxy            string   `json:"inProxy"`
	}
	jsonInspectorAnswer struct {
		ID         string          `json:"id"`
		URL        string          `json:"url"`
		Answer     *jsonAnswer     `json:"answer"`
		Handshakes *jsonHandshakes `json:"handshakes"`
	}
	jsonDeliveryRow struct {
		ID             string        `json:"id"`
		Address        string        `json:"address"`
		Method         string        `json:"method"`
		Path           string        `json:"path"`
		ReceivedAt     string        `json:"receivedAt"`
		ResponseStatus *int          `json:"responseStatus"`
		BodySize       int           `json:"bodySize"`
		Attempts       int           `json:"attempts"`
		Provider       *jsonProvider `json:"provider"`
		Duplicates     int           `json:"duplicates"`
		Hint           *string       `json:"hint"` // only when there is one
	}
	jsonProvider struct {
		Name       string  `json:"name"`
		EventType  *string `json:"eventType"`
		DeliveryID *string `json:"deliveryId"`
	}
	jsonEdit struct {
		Method       *string      `json:"method"`
		Path         *string      `json:"path"`
		SetHeaders   []jsonHeader `json:"setHeaders"`
		UnsetHeaders []string     `json:"unsetHeaders"`
		Body         *string      `json:"body"`
		BodyBase64   *string      `json:"bodyBase64"`
	}
	jsonHeader struct {
		Name        string  `json:"name"`
		Value       string  `json:"value"`
		ValueBase64 *string `json:"valueBase64"`
	}
	jsonAttempt struct {
		ID         string    `json:"id"`
		Status     *int      `json:"status"`
		StartedAt  string    `json:"startedAt"`
		DurationMs *int      `json:"durationMs"`
		Error      *string   `json:"error"`
		Retry      bool      `json:"retry"`
		Late       bool      `json:"late"`
		Edit       *jsonEdit `json:"edit"`
		Signature  *string   `json:"signature"`
		Fidelity   struct {
			Status      string   `json:"status"`
			Differences []string `json:"differences"`
		} `json:"fidelity"`
		Role              string  `json:"role"`
		AgentID           *string `json:"agentId"`
		Queued            bool    `json:"queued"`
		PossibleDuplicate bool    `json:"possibleDuplicate"`
	}
	jsonDelivery struct {
		ID             string        `json:"id"`
		Address        string        `json:"address"`
		URL            string        `json:"url"`
		Method         string        `json:"method"`
		Path           string        `json:"path"`
		PathBase64     *string       `json:"pathBase64"`
		Headers        []jsonHeader  `json:"headers"`
		BodyBase64     string        `json:"bodyBase64"`
		BodySize       int           `json:"bodySize"`
		Complete       bool          `json:"complete"`
		BodyUnread     bool          `json:"bodyUnread"`
		StoredBytes    int           `json:"storedBytes"`
		ReceivedAt     string        `json:"receivedAt"`
		ResponseStatus *int          `json:"responseStatus"`
		Attempts       []jsonAttempt `json:"attempts"`
		Provider       *jsonProvider `json:"provider"`
		Duplicates     int           `json:"duplicates"`
		// ResponseNotCaptured is null unless the account was at its
		// storage quota when the latest answer was recorded.
		ResponseNotCaptured *string `json:"responseNotCaptured"`
		Why                 string  `json:"why"`
		Curl                string  `json:"curl"`
		CurlWithheld        string  `json:"curlWithheld"`
	}
	jsonRetry struct {
		DeliveryID     string        `json:"deliveryId"`
		ResponseStatus *int          `json:"responseStatus"`
		Attempt        *jsonAttempt  `json:"attempt"`
		Attempts       []jsonAttempt `json:"attempts"`
	}
	jsonInspector struct {
		ID        string `json:"id"`
		URL       string `json:"url"`
		ExpiresAt string `json:"expiresAt"`
		Smee      bool   `json:"smee"`
	}
	jsonListenEvent struct {
		Event     string    `json:"event"`
		Time      time.Time `json:"time"`
		Endpoints []struct {
			ID     string `json:"id"`
			Name   string `json:"name"`
			URL    string `json:"url"`
			Mode   string `json:"mode"`
			Target string `json:"target"`
		} `json:"endpoints"`
		Reason     string `json:"reason"`
		EndpointID string `json:"endpointId"`
		DeliveryID string `json:"deliveryId"`
		AttemptID  string `json:"attemptId"`
		Method     string `json:"method"`
		Path       string `json:"path"`
		Status     int    `json:"status"`
		DurationMs int64  `json:"durationMs"`
		Error      string `json:"error"`
	}
	jsonLogin struct {
		Server  string `json:"server"`
		Account struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"account"`
		Endpoints int    `json:"endpoints"`
		Config    string `json:"config"`
	}
	jsonDeleted struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
)

// decodeStrict decodes one JSON value that must have exactly v's fields.
func decodeStrict(t *testing.T, what, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s -o json: %v\n%s", what, err, s)
	}
}

// jsonOut runs a command with -o json; it must exit 0 and print only JSON
// on stdout.
func (h cliHome) jsonOut(t *testing.T, v any, args ...string) {
	t.Helper()
	c := h.command("")
	c.Env = append(c.Env, "NO_COLOR=1")
	out, code := harness.RunWith(t, c, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("relay %v -o json exited %d:\n%s", args, code, out)
	}
	decodeStrict(t, strings.Join(args, " "), out, v)
}

// TestCLIJSONOutputs: every data-printing command's -o json decodes into
// its documented shape, and the curl line of deliveries show replays the
// request byte for byte.
func TestCLIJSONOutputs(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)

	var login jsonLogin
	h.jsonOut(t, &login, "login", "--token", acct.Token)
	if login.Account.ID != acct.ID || login.Server != "http://127.0.0.1:"+strconv.Itoa(r.Port) || login.Config != h.configPath() {
		t.Errorf("login: %+v", login)
	}
	var created jsonEndpoint
	h.jsonOut(t, &created, "endpoints", "create", "orders", "--target", port)
	if created.Name != "orders" || created.Mode != "PROXY" || strp(created.Target) != strconv.Quote("localhost:"+port) || created.URL == "" {
		t.Errorf("endpoints create: %+v", created)
	}
	var updated jsonEndpoint
	h.jsonOut(t, &updated, "endpoints", "update", "orders", "--response-capture")
	if updated.ID != created.ID || !updated.ResponseCapture {
		t.Errorf("endpoints update: %+v", updated)
	}
	var list []jsonEndpoint
	h.jsonOut(t, &list, "endpoints", "list")
	if len(list) != 1 || list[0].ID != created.ID {
		t.Errorf("endpoints list: %+v", list)
	}

	listen := h.startIn(t, t.TempDir(), "listen", port, "orders", "-o", "json")
	tail := h.startIn(t, t.TempDir(), "tail", "orders", "-o", "json")
	line := waitOutput(t, listen, regexp.MustCompile(`(?m)^(\{"event":"connected".*)$`))[1]
	var connected jsonListenEvent
	decodeStrict(t, "listen", line, &connected)
	if len(connected.Endpoints) != 1 || connected.Endpoints[0].ID != created.ID || connected.Endpoints[0].Target != "http://localhost:"+port {
		t.Errorf("listen connected event: %+v", connected)
	}
	waitAgent(t, r, acct.Token, created.ID, true)
	waitOutput(t, tail, regexp.MustCompile(`tailing `))
	body := []byte("a\x00b\r\n'$(x)'\xff")
	headers := [][2]string{{"X-Sig", "t=1, v1=abc"}, {"X-Sig", "second"}, {"Content-Type", "application/octet-stream"}}
	if resp := send(t, r, created.ID, "POST", "/orders/[1]?q=a%20b", headers, body); resp.Status != 200 {
		t.Fatalf("sender got %d", resp.Status)
	}
	line = waitOutput(t, listen, regexp.MustCompile(`(?m)^(\{"event":"forward".*)$`))[1]
	var fwd jsonListenEvent
	decodeStrict(t, "listen", line, &fwd)
	if fwd.Status != 200 || fwd.Path != "/orders/[1]?q=a%20b" || fwd.DeliveryID == "" || fwd.EndpointID != created.ID {
		t.Errorf("listen forward event: %+v", fwd)
	}
	line = waitOutput(t, tail, regexp.MustCompile(`(?m)^(\{.*"responseStatus":200.*)$`))[1]
	var tailed jsonDeliveryRow
	decodeStrict(t, "tail", line, &tailed)
	if tailed.ID != fwd.DeliveryID || tailed.BodySize != len(body) {
		t.Errorf("tail row %+v, want delivery %s of %d bytes", tailed, fwd.DeliveryID, len(body))
	}

	var rows []jsonDeliveryRow
	h.jsonOut(t, &rows, "deliveries", "list", "orders", "--status", "2xx")
	if len(rows) != 1 || rows[0].ID != fwd.DeliveryID || rows[0].Method != "POST" || rows[0].Attempts != 1 {
		t.Errorf("deliveries list: %+v", rows)
	}
	h.jsonOut(t, &rows, "deliveries", "list", "orders", "--status", "5xx")
	if len(rows) != 0 {
		t.Errorf("deliveries list --status 5xx: %+v, want none", rows)
	}
	var shown jsonDelivery
	h.jsonOut(t, &shown, "deliveries", "show", fwd.DeliveryID)
	if shown.ID != fwd.DeliveryID || shown.URL != created.URL || len(shown.Attempts) != 1 || !strings.Contains(shown.Curl, "base64 -d") ||
		!strings.HasPrefix(shown.Why, "Answered 200 by your local process at ") {
		t.Errorf("deliveries show: %+v", shown)
	}
	var why jsonExplanation
	h.jsonOut(t, &why, "deliveries", "explain", fwd.DeliveryID)
	if why.ID != fwd.DeliveryID || intp(why.Status) != "200" || why.Summary != shown.Why || len(why.Facts) < 3 {
		t.Errorf("deliveries explain: %+v", why)
	}
	// The curl line sends the same request again: same target, headers and body bytes.
	before := len(seen.all())
	if out, err := runShell(shown.Curl); err != nil {
		t.Fatalf("the curl line failed: %v\n%s\n%s", err, shown.Curl, out)
	}
	all := seen.all()
	if len(all) != before+1 {
		t.Fatalf("the curl line reached the local server %d times", len(all)-before)
	}
	orig, replay := all[before-1], all[before]
	if replay.RequestURI != orig.RequestURI || !bytes.Equal(replay.Body, orig.Body) ||
		strings.Join(replay.Header.Values("X-Sig"), "|") != "t=1, v1=abc|second" ||
		replay.Header.Get("User-Agent") != "" || replay.Header.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("replay %+v\ndiffers from %+v", replay, orig)
	}

	var retried jsonRetry
	h.jsonOut(t, &retried, "retry", fwd.DeliveryID)
	if retried.DeliveryID != fwd.DeliveryID || retried.Attempt == nil || intp(retried.Attempt.Status) != "200" || !retried.Attempt.Retry || len(retried.Attempts) != 2 {
		t.Errorf("retry: %+v", retried)
	}
	var insp jsonInspector
	h.jsonOut(t, &insp, "inspector", "create")
	if insp.ID == "" || !strings.Contains(insp.URL, insp.ID) || insp.ExpiresAt == "" {
		t.Errorf("inspector create: %+v", insp)
	}
	listen.Stop(t)
	var deleted jsonDeleted
	h.jsonOut(t, &deleted, "endpoints", "delete", "orders")
	if deleted.ID != created.ID || !deleted.Deleted {
		t.Errorf("endpoints delete: %+v", deleted)
	}
}

func runShell(cmd string) ([]byte, error) {
	return exec.Command("/bin/sh", "-c", cmd).CombinedOutput()
}

// TestCLIExitCodes: 0 success (and every --help), 1 the operation failed
// (a retry not answered 2xx, the relay unreachable), 2 usage or refusal
// (bad arguments, no or bad token, unknown ids), said plainly.
func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "down", "mode": "PROXY", "target": "127.0.0.1:1"})
	agent := h.startIn(t, t.TempDir(), "agent", "--endpoint", ep.ID)
	waitAgent(t, r, acct.Token, ep.ID, true)
	send(t, r, ep.ID, "POST", "/x", nil, nil) // nothing listens on port 1: 502
	d := deliveryAt(t, r, acct.Token, ep.ID, "/x")
	h2, acct2 := loggedInHome(t, r) // an account of its own: h's counts stay
	away := createEndpointFor(t, r, acct2.Token, map[string]any{"name": "away", "mode": "PROXY", "target": "127.0.0.1:1"})
	send(t, r, away.ID, "POST", "/y", nil, nil) // no agent: 503
	offline := deliveryAt(t, r, acct2.Token, away.ID, "/y")
	guest := storeBody(t, r, []byte("hello")) // an inspector's delivery: answered by the relay, no attempts
	closed := "http://127.0.0.1:" + strconv.Itoa(harness.ClosedPort(t))
	port := strconv.Itoa(r.Port)
	loopback := "http://127.0.0.1:" + port // the URL h logged in with
	fresh := newCLIHome(t)
	noLog, missing := t.TempDir(), filepath.Join(t.TempDir(), "relay-data") // a folder with no log, none at all
	exported := filepath.Join(t.TempDir(), "events.jsonl")
	harFile := filepath.Join(t.TempDir(), "hooks.har")
	folder := t.TempDir()
	noFolder := filepath.Join(folder, "nosuch", "hooks.har")
	pubFile := filepath.Join(t.TempDir(), "relay.pub")              // relay events pubkey > relay.pub
	emptyProof := filepath.Join(t.TempDir(), "delivery.proof.json") // relay events prove ID > FILE, refused before a checkpoint
	if err := os.WriteFile(emptyProof, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	emptyExport, blankExport := filepath.Join(t.TempDir(), "empty.jsonl"), filepath.Join(t.TempDir(), "blank.jsonl")
	if os.WriteFile(emptyExport, nil, 0o600) != nil || os.WriteFile(blankExport, []byte("\n\n  \r\n"), 0o600) != nil {
		t.Fatal("write the empty exports")
	}
	if out, code := h.run(t, "", "events", "pubkey", "--data", r.Data); code != 0 || os.WriteFile(pubFile, []byte(out), 0o600) != nil {
		t.Fatalf("relay events pubkey exited %d:\n%s", code, out)
	}

	tests := []struct {
		name string
		home cliHome
		args []string
		code int
		want string
		// notWant is what a new user must not meet: cobra's and the HTTP
		// client's own words.
		notWant string
	}{
		{"help", h, []string{"--help"}, 0, "listen", ""},
		{"help agent lists flags", h, []string{"help", "agent"}, 0, "--endpoint", ""},
		{"listen --help", h, []string{"listen", "--help"}, 0, "Examples:", ""},
		{"agent --help", h, []string{"agent", "--help"}, 0, "--insecure", ""},
		{"endpoints list", h, []string{"endpoints", "list"}, 0, ep.ID, ""},
		// Before "retry answered 502" gives d a second attempt.
		{"diff of one attempt", h, []string{"deliveries", "diff", d.ID}, 2, d.ID + " has 1 attempt: nothing to compare it with yet (relay retry " + d.ID + " makes a second)", "attempt(s)"},
		{"diff of no attempts", h, []string{"deliveries", "diff", guest, "original", "1"}, 2, guest + " has no attempts to compare: nothing was forwarded, the relay answered it itself", "from 1 to 0"},
		{"retry an inspector's delivery", h, []string{"retry", guest}, 2, "an inspector's are sent again by the curl command relay deliveries show " + guest + " --body prints", ""},
		{"completion script", h, []string{"completion", "bash"}, 0, "__start_relay", ""},
		{"flags complete", h, []string{"__complete", "agent", "--"}, 0, "--endpoint", ""},
		{"unknown command", h, []string{"nope"}, 2, "unknown command", ""},
		{"misspelt command", h, []string{"lisen", "3000"}, 2, `unknown command "lisen"; did you mean listen?`, ""},
		{"misspelt subcommand", h, []string{"events", "verfy"}, 2, `events: unknown command "verfy"; did you mean verify?`, "Usage:"},
		{"unknown flag", h, []string{"endpoints", "list", "--nope"}, 2, "endpoints list: unknown flag: --nope (relay endpoints list --help lists the flags)", ""},
		{"bad output", h, []string{"endpoints", "list", "-o", "yaml"}, 2, "want text or json", ""},
		{"listen without target", h, []string{"listen"}, 2, "listen: missing argument; usage: relay listen TARGET [ENDPOINT...]", "arg(s)"},
		{"show without id", h, []string{"deliveries", "show"}, 2, "deliveries show: missing argument; usage: relay deliveries show DELIVERY_ID", "arg(s)"},
		{"show two ids", h, []string{"deliveries", "show", "a", "b"}, 2, `deliveries show: too many arguments ("a" "b")`, "arg(s)"},
		{"listen remote target", h, []string{"listen", "example.com:80"}, 2, "must be 127.0.0.1", ""},
		{"endpoint target a word", h, []string{"endpoints", "create", "typo", "--target", "abc"}, 2, `--target "abc": want a port (3000), localhost:PORT or 127.0.0.1:PORT`, "port must be a number"},
		{"listen a word", h, []string{"listen", "abc"}, 2, `listen: target "abc": want a port (3000), localhost:PORT, 127.0.0.1:PORT or a URL`, "invalid target"},
		{"listen unknown endpoint", h, []string{"listen", "3000", "nosuch"}, 2, "NOT_FOUND", ""},
		{"agent unknown endpoint", h, []string{"agent", "--endpoint", "nosuch=3000"}, 2, "not found", ""},
		{"agent given a name", h, []string{"agent", "--endpoint", "down=3000"}, 2, `endpoint "down" not found for this token (NOT_FOUND): --endpoint takes an Endpoint's id, as relay endpoints list shows it`, "not found: not found"},
		{"agent no endpoint", h, []string{"agent"}, 2, "missing --endpoint", ""},
		{"not logged in", fresh, []string{"endpoints", "list"}, 2, "no token", ""},
		{"bad token", h, []string{"endpoints", "list", "--token", "rly_notatoken"}, 2, "UNAUTHENTICATED", ""},
		{"whoami signed out", fresh, []string{"whoami"}, 2, "relay: no token: run `relay login` (or pass --token, or set RELAY_TOKEN)", "account"},
		{"whoami with a refused token", h, []string{"whoami", "--token", "rly_notatoken"}, 2,
			"relay: whoami: token refused by " + loopback + ": unauthenticated; run `relay login --server " + loopback + "` (UNAUTHENTICATED)", "account"},
		{"retry answered 502", h, []string{"retry", d.ID}, 1, "attempt 2: 502", ""},
		{"retry unknown", h, []string{"retry", "nosuch"}, 2, `retry: refused: no delivery "nosuch" (for this token) (NOT_FOUND)`, ""},
		{"revoke an unknown token", h, []string{"tokens", "revoke", "ci"}, 2, `no token with id "ci" in this account (relay tokens list shows the ids)`, ""},
		{"show unknown", h, []string{"deliveries", "show", unknownDelivery()}, 2, "NOT_FOUND", ""},
		{"explain unknown", h, []string{"deliveries", "explain", unknownDelivery()}, 2, "NOT_FOUND", ""},
		{"explain", h, []string{"deliveries", "explain", d.ID}, 0, "The sender was answered 502 by the relay at ", ""},
		{"list a mistyped name", h, []string{"deliveries", "list", "dwn"}, 2, `no endpoint or inspector "dwn" (for this token); did you mean "down"?`, ""},
		{"listen a mistyped name", h, []string{"listen", "3000", "donw"}, 2, `no endpoint "donw" for this token; did you mean "down"?`, ""},
		{"list unknown address", h, []string{"deliveries", "list", unknownAddress()}, 2, "NOT_FOUND", ""},
		{"bad status filter", h, []string{"deliveries", "list", ep.ID, "--status", "9xx"}, 2, "--status", ""},
		{"tail unknown", h, []string{"tail", unknownAddress()}, 2, "NOT_FOUND", ""},
		{"verify a folder with no log", h, []string{"events", "verify", "--data", noLog}, 2, "no event log in " + noLog, "ok:"},
		{"rebuild a folder with no log", h, []string{"events", "rebuild", "--data", noLog}, 2, "no event log in " + noLog, "rebuilt views"},
		{"export no folder", h, []string{"events", "export", "--data", missing}, 2, "no event log in " + missing, "unable to open database file"},
		{"relay unreachable", h, []string{"endpoints", "list", "--server", closed, "--token", "t"}, 1, "cannot reach the relay at " + closed + " (connection refused): is `relay serve` running there?", "dial tcp"},
		{"whoami, relay unreachable", h, []string{"whoami", "--server", closed, "--token", "t"}, 1, "relay: whoami: cannot reach the relay at " + closed + " (connection refused): is `relay serve` running there?", "dial tcp"},
		// What a new user pastes or types after the README.
		{"server given as the API's URL", h, []string{"endpoints", "list", "--server", loopback + "/graphql"}, 0, ep.ID, "405 Method Not Allowed"},
		{"server by another loopback name", h, []string{"endpoints", "list", "--server", "http://localhost:" + port}, 0, ep.ID, "no token"},
		{"https to a plain relay", h, []string{"endpoints", "list", "--server", "https://127.0.0.1:" + port, "--token", "t"}, 2,
			"the relay at https://127.0.0.1:" + port + " answers plain HTTP; use " + loopback, "server gave HTTP response"},
		{"proxy mode without a target", h, []string{"endpoints", "create", "notarget", "--mode", "proxy"}, 2, "PROXY mode needs a target such as 127.0.0.1:3000; give it with --target, such as --target 3000", ""},
		{"create a name in use", h, []string{"endpoints", "create", "down"}, 2, `an Endpoint named "down" exists (id ` + ep.ID + ")", ""},
		{"export -o json", h, []string{"deliveries", "export", "down", "-o", "json"}, 2, `-o "json": deliveries export writes HAR`, "exported"},
		{"members of an account made by --signup", h, []string{"members", "list"}, 0, `no members: this account works with tokens only; give it a first owner`, "LOGIN"},
		{"accounts create -o json", h, []string{"accounts", "create", "--name", "ci", "--data", t.TempDir(), "-o", "json"}, 0, `"token": "rly_`, "unknown shorthand flag"},
		{"accounts create, admin token refused", h, []string{"accounts", "create", "--name", "x", "--server", loopback, "--admin-token", "wrong"}, 2,
			"create account: the relay at " + loopback + " refused the admin token: give the --admin-token relay serve runs with", "relay login"},
		{"accounts usage, admin token refused", h, []string{"accounts", "usage", "--server", loopback, "--admin-token", "wrong"}, 2, "refused the admin token", "relay login"},
		{"version as JSON", h, []string{"version", "-o", "json"}, 0, `"commit": "`, "unknown shorthand flag"},
		{"guest inspector on a relay given by --server", fresh, []string{"inspector", "create", "--server", loopback}, 0, " --server " + loopback + "\n", ""},
		{"inspector on the stored relay", h, []string{"inspector", "create"}, 0, "see them with: relay deliveries list ", "--server"},
		{"stats in local time, as every text output", h, []string{"stats", "down"}, 0, ", 60 buckets of 1m)", "Z to "},
		{"events export -o FILE", h, []string{"events", "export", "--data", r.Data, "-o", exported}, 0, "", "unknown shorthand flag"},
		{"events verify the file written", h, []string{"events", "verify", exported}, 0, "ok: ", ""},
		{"events verify --pubkey FILE", h, []string{"events", "verify", exported, "--pubkey", pubFile}, 0, "ok: ", "want ed25519"},
		{"events verify an empty file", h, []string{"events", "verify", emptyExport}, 2, emptyExport + " is empty: an export of the event log has a line per event; relay events export --data DIR -o events.jsonl writes one", "ok:"},
		{"events verify a file of blank lines", h, []string{"events", "verify", blankExport}, 2, blankExport + " is empty", "ok:"},
		{"events verify a file that is not there", h, []string{"events", "verify", "nosuch.jsonl"}, 2, "no export file nosuch.jsonl: give the file relay events export wrote", ""},
		{"events verify --pubkey no file", h, []string{"events", "verify", exported, "--pubkey", "nosuch.pub"}, 2, `--pubkey "nosuch.pub": neither a key (ed25519:BASE64) nor a file holding one`, ""},
		{"events export -o json", h, []string{"events", "export", "--data", r.Data, "-o", "json"}, 2, `-o "json": events export writes JSON lines; its -o names the file to write`, ""},
		{"export HAR", h, []string{"deliveries", "export", "down", "-o", harFile}, 0, "exported 1 delivery", ""},
		{"export into a folder that is not there", h, []string{"deliveries", "export", "down", "-o", noFolder}, 2, "export: -o " + noFolder + ": there is no folder " + filepath.Dir(noFolder), ".partial"},
		{"export onto a folder", h, []string{"deliveries", "export", "down", "-o", folder}, 2, "export: -o " + folder + " is a folder: name the file to write in it", ".partial"},
		{"events export into a folder that is not there", h, []string{"events", "export", "--data", r.Data, "-o", noFolder}, 2, "there is no folder " + filepath.Dir(noFolder), ".partial"},
		{"replay a HAR file", h, []string{"replay", harFile, "--to", closed}, 2, "a HAR file, not a relay bundle: export a replay bundle with relay deliveries export ADDRESS --format bundle", ""},
		{"events verify a HAR file", h, []string{"events", "verify", harFile}, 2, harFile + " is a HAR file, not an export of the event log: give the file relay events export wrote", "unexpected end of JSON"},
		{"retry with no agent", h2, []string{"retry", offline.ID}, 2, "no agent connected; a retry goes through a listener: start relay listen PORT ENDPOINT, then retry (AGENT_NOT_CONNECTED)", ""},
		{"login counts in words", h, []string{"login", "--server", loopback, "--token", acct.Token}, 0, "(1 endpoint)", "endpoints)"},
		// What a user of other webhook tools types by habit.
		{"ngrok's http", h, []string{"http", "3000"}, 2, `unknown command "http"; did you mean listen?`, ""},
		{"Stripe CLI's --forward-to", h, []string{"listen", "--forward-to", "localhost:3000/webhooks"}, 2,
			"listen: unknown flag: --forward-to; the local server is listen's first argument, not a flag: relay listen 3000", ""},
		{"smee's -p", h, []string{"listen", "-p", "3000"}, 2, "the local server is listen's first argument, not a flag", ""},
		{"target after the endpoint", h, []string{"listen", "down", "3000"}, 2, "TARGET comes first: relay listen 3000 down", ""},
		{"Stripe CLI's logs", h, []string{"logs", "tail"}, 2, `unknown command "logs"; did you mean tail?`, "login"},
		{"Stripe CLI's resend", h, []string{"resend", d.ID}, 2, `unknown command "resend"; did you mean retry?`, ""},
		{"ngrok's authtoken", h, []string{"authtoken", "x"}, 2, `unknown command "authtoken"; did you mean login?`, ""},
		{"sign up as a command", h, []string{"signup", "me"}, 2, `unknown command "signup"; did you mean login?`, ""},
		{"inspector new", h, []string{"inspector", "new"}, 2, `inspector: unknown command "new"; did you mean create?`, ""},
		{"endpoints add", h, []string{"endpoints", "add", "x"}, 2, `endpoints: unknown command "add"; did you mean create?`, ""},
		{"deliveries get", h, []string{"deliveries", "get", d.ID}, 2, `deliveries: unknown command "get"; did you mean show?`, ""},
		{"gh's auth status", h, []string{"status"}, 2, `unknown command "status"; did you mean whoami?`, "stats"},
		{"-V", h, []string{"-V"}, 2, "unknown shorthand flag: 'V' in -V; the version is relay version (or -v)", ""},
		{"Stripe CLI's events resend", h, []string{"events", "resend", d.ID}, 2, `events: unknown command "resend"; did you mean relay retry?`, ""},
		{"deliveries replay", h, []string{"deliveries", "replay", d.ID}, 2, `deliveries: unknown command "replay"; did you mean relay retry?`, ""},
		{"listen an empty filter", h, []string{"listen", "3000", "--filter", ""}, 2, `--filter "" is empty: to forward every delivery give no --filter`, "no '='"},
		{"endpoints update an empty filter", h, []string{"endpoints", "update", "down", "--filter", ""}, 2, `--filter "" is empty: --no-filters removes the Endpoint's filters`, "no '='"},
		{"--json", h, []string{"deliveries", "show", d.ID, "--json"}, 2, "unknown flag: --json; JSON is -o json", ""},
		{"hookdeck's --path", h, []string{"listen", "3000", "--path", "/webhooks"}, 2, "unknown flag: --path; the path goes in TARGET: relay listen localhost:3000/webhooks", ""},
		{"Stripe CLI's --skip-verify", h, []string{"listen", "https://localhost:8443", "--skip-verify"}, 2, "a self-signed local certificate is accepted with --insecure", ""},
		{"replay a delivery id", h, []string{"replay", d.ID}, 2, d.ID + " is a delivery id, not a bundle file: relay retry " + d.ID + " sends a stored delivery again", "--to is required"},
		{"replay a bundle that is not there", h, []string{"replay", "nosuch.bundle", "--to", closed}, 2, "no bundle file nosuch.bundle: give the file relay deliveries export ADDRESS --format bundle -o FILE wrote", "open nosuch.bundle"},
		{"verify an empty proof", h, []string{"events", "verify", "--proof", emptyProof, "--pubkey", pubFile}, 2, " is empty: relay events prove writes a proof only once a checkpoint signs the delivery", "unexpected end of JSON input"},
		{"serve --port", h, []string{"serve", "--port", "8080"}, 2, "unknown flag: --port; the port is part of --listen: --listen 127.0.0.1:8080", ""},
		{"serve given a port", h, []string{"serve", "8080"}, 2, "serve: the port is part of --listen: relay serve --listen 127.0.0.1:8080", "too many arguments"},
		{"serve -p", h, []string{"serve", "-p", "8080"}, 2, "the port is part of --listen: --listen 127.0.0.1:8080", ""},
		{"start the relay", h, []string{"start"}, 2, `unknown command "start"; did you mean serve?`, "stats"},
		{"ngrok's --url", h, []string{"listen", "3000", "--url", "my-app.example.com"}, 2, "a lasting public URL is an Endpoint's: name it after TARGET, relay listen 3000 my-app", ""},
		{"serve --listen a bare port", h, []string{"serve", "--listen", "8080", "--data", noLog}, 2, `--listen "8080": want host:port, such as 127.0.0.1:8080 (or :8080 for every interface)`, "missing port in address"},
		{"serve a flag out of bounds", h, []string{"serve", "--queue-backlog", "0", "--data", noLog}, 2, "--queue-backlog 0: must be from 1 to 10000000", ""},
		// smee-client and gosmee do not resolve <id>.localhost as curl does.
		{"smee URL on a laptop relay", h, []string{"inspector", "create", "--smee"}, 0, `.localhost up in /etc/hosts and DNS, which may not know it (getaddrinfo ENOTFOUND); if so, add the line "127.0.0.1 `, ""},
	}
	check := func(name string, home cliHome, args []string, wantCode int, want, notWant string) {
		t.Helper()
		out, code := home.run(t, "", args...)
		if code != wantCode || !strings.Contains(out, want) || (notWant != "" && strings.Contains(out, notWant)) {
			t.Errorf("%s: relay %v exited %d, want %d and output containing %q, not %q:\n%s", name, args, code, wantCode, want, notWant, out)
		}
	}
	// A script's standard input is often /dev/null, a character device
	// but no terminal: login then wants a token, and waits for no
	// approval in a browser nobody opens.
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	script := fresh.command("")
	script.Stdin = devnull
	if out, code := harness.RunWith(t, script, "login", "--server", loopback); code != 2 || !strings.Contains(out, "no token on standard input (not a terminal): pipe one in, pass --token T or set RELAY_TOKEN, create an account with --signup NAME, or approve this machine in the browser with --device") {
		t.Errorf("login from a script exited %d, want 2 asking for a token:\n%s", code, out)
	}
	for _, tt := range tests {
		check(tt.name, tt.home, tt.args, tt.code, tt.want, tt.notWant)
	}
	if _, err := os.Stat(filepath.Join(noLog, "events.db")); err == nil {
		t.Errorf("events verify or rebuild made a log in %s", noLog)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("events export made the folder %s", missing)
	}
	agent.Stop(t)
	waitAgent(t, r, acct.Token, ep.ID, false)
	check("retry with no agent", h, []string{"retry", d.ID}, 2, "AGENT_NOT_CONNECTED", "")

	// Ctrl-C in a command that ends with it (a device login waiting for
	// its approval): exit 1, said as such.
	login := h.startIn(t, t.TempDir(), "login", "--server", r.BareURL(), "--device", "--force")
	waitOutput(t, login, regexp.MustCompile(`Waiting for approval`))
	if err := login.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 15*time.Second, "login to end on Ctrl-C", login.Exited)
	if _, code := login.ExitCode(); code != 1 || !strings.Contains(login.Output(), "relay: interrupted") || strings.Contains(login.Output(), "context canceled") {
		t.Errorf("login exited %d on Ctrl-C, want 1 and \"relay: interrupted\":\n%s", code, login.Output())
	}
}

// TestLongRunningCommandsWaitForTheRelay: listen and tail retry an
// unreachable relay with backoff instead of failing (a one-shot command
// exits 1, TestCLIExitCodes), and Ctrl-C still ends them with 0.
func TestLongRunningCommandsWaitForTheRelay(t *testing.T) {
	t.Parallel()
	closed := "http://127.0.0.1:" + strconv.Itoa(harness.ClosedPort(t))
	h := newCLIHome(t)
	for _, args := range [][]string{{"listen", "3000"}, {"tail", "some-endpoint"}} {
		p := h.startIn(t, t.TempDir(), append(args, "--server", closed, "--token", "t")...)
		waitOutput(t, p, regexp.MustCompile(`connection refused\b.*; retrying in`))
		if err := p.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 15*time.Second, args[0]+" to end on Ctrl-C", p.Exited)
		if _, code := p.ExitCode(); code != 0 {
			t.Errorf("%s exited %d on Ctrl-C, want 0:\n%s", args[0], code, p.Output())
		}
	}
}

// TestDeliveriesShowIncompleteBody: deliveries show says how much of a body
// over the capture cap is stored and gives no replay command for it (text
// and -o json), and its default output stays short: the curl command with a
// body in base64 only with --body.
func TestDeliveriesShowIncompleteBody(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, t.TempDir())
	h := newCLIHome(t)
	big := storeBody(t, r, bytes.Repeat([]byte("a"), 300<<10))
	small := storeBody(t, r, bytes.Repeat([]byte("b"), 4<<10))

	out, code := h.run(t, "", "deliveries", "show", big, "--server", r.BareURL())
	if code != 0 || !strings.Contains(out, "\nwhy: Answered 204 by the relay at ") ||
		!strings.Contains(out, "body: stored 256 KiB of 300 KiB (incomplete)") ||
		!strings.Contains(out, "no replay command: the body is stored 256 KiB of 300 KiB") || strings.Contains(out, "curl") {
		t.Errorf("deliveries show of an incomplete body exited %d:\n%s", code, out)
	}
	var shown jsonDelivery
	h.jsonOut(t, &shown, "deliveries", "show", big, "--server", r.BareURL())
	if shown.Curl != "" || shown.CurlWithheld == "" || shown.StoredBytes != 256<<10 || shown.Complete {
		t.Errorf("-o json of an incomplete body: curl %q, withheld %q, stored %d, complete %v", shown.Curl, shown.CurlWithheld, shown.StoredBytes, shown.Complete)
	}

	out, code = h.run(t, "", "deliveries", "show", small, "--server", r.BareURL())
	if code != 0 || strings.Contains(out, "YmJi") || !strings.Contains(out, "relay deliveries show "+small+" --body") {
		t.Errorf("the default output of a complete body holds its base64 or lacks the way to the command (exit %d):\n%s", code, out)
	}
	out, _ = h.run(t, "", "deliveries", "show", small, "--server", r.BareURL(), "--body")
	if !strings.Contains(out, "replay with:\nprintf '%s' 'YmJi") {
		t.Errorf("with --body the curl command is missing:\n%s", out)
	}
}
