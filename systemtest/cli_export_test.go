package systemtest

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// exportSample is one request recordForExport sends.
type exportSample struct {
	method, target string
	headers        [][2]string
	body           []byte
}

// The requests every export test records, in this order: a binary body
// with repeated headers, a query, a path and a header value that are not
// UTF-8 (answered with a binary body); JSON; a GET with a query and no
// body; a body over the capture cap (stored in part); and one the local
// process answers only when the test lets it.
var exportSamples = []exportSample{
	{"POST", "/hooks/caf\xe9?x=1&x=2&q=a%20b", [][2]string{{"X-Sig", "t=1,v1=one"}, {"Content-Type", "application/octet-stream"}, {"X-Sig", "two"}, {"X-Latin", "caf\xe9"}}, []byte("\x00\xff\xfebinary\x80\r\n")},
	{"POST", "/json", [][2]string{{"Content-Type", "application/json"}}, []byte(`{"type":"charge.succeeded","n":1}`)},
	{"GET", "/page?empty=&flag&s=%E2%9C%93", nil, nil},
	{"POST", "/big", [][2]string{{"Content-Type", "text/plain"}}, bytes.Repeat([]byte("0123456789"), 300)},
	{"POST", "/slow", [][2]string{{"Content-Type", "text/plain"}}, []byte("wait for me")},
}

// pngBytes is the binary answer to the first sample.
var pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\xff")

// exportRig is a relay with the samples recorded at a PROXY Endpoint that
// captures responses, the last one still waiting for its answer until
// answerSlow.
type exportRig struct {
	r          *harness.Relay
	home       cliHome
	token      string
	ep         endpointInfo
	answerSlow func() harness.Response
}

func recordForExport(t *testing.T) *exportRig {
	t.Helper()
	// A capture cap of 1 KiB stores the 3 000-byte body in part.
	r := harness.Start(t, "", "--capture-cap", "1KiB")
	h, acct := loggedInHome(t, r)
	release := make(chan struct{})
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		switch {
		case strings.HasPrefix(req.RequestURI, "/hooks/"):
			w.Header().Set("Content-Type", "image/png")
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "abc"})
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(pngBytes)
		case req.RequestURI == "/slow":
			<-release
			_, _ = io.WriteString(w, "late")
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "shop", "mode": "PROXY", "target": target, "responseCapture": true})
	startAgentFor(t, r, acct.Token, ep.ID, target)
	for _, s := range exportSamples[:len(exportSamples)-1] {
		if resp := send(t, r, ep.ID, s.method, s.target, s.headers, s.body); resp.Status >= 300 {
			t.Fatalf("%s %q: sender got %d %s", s.method, s.target, resp.Status, resp.Body)
		}
	}
	slow := exportSamples[len(exportSamples)-1]
	answered := make(chan harness.Response, 1)
	go func() {
		resp, err := r.TrySendRaw(harness.RawRequest{Method: slow.method, Target: slow.target, Host: r.AddressHost(ep.ID), Headers: slow.headers, Body: slow.body})
		if err != nil {
			resp.Status = -1
		}
		answered <- resp
	}()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	harness.Eventually(t, 15*time.Second, "the waiting request to be recorded", func() bool {
		return len(exportRecords(t, r, acct.Token, ep.ID)) == len(exportSamples)
	})
	return &exportRig{r: r, home: h, token: acct.Token, ep: ep, answerSlow: func() harness.Response {
		once.Do(func() { close(release) })
		resp := <-answered
		harness.Eventually(t, 15*time.Second, "the late answer to be recorded", func() bool {
			recs := exportRecords(t, r, acct.Token, ep.ID)
			return recs[len(recs)-1].ResponseStatus != nil
		})
		return resp
	}}
}

// exportRecord is a delivery as the API has it, with exact bytes.
type exportRecord struct {
	ID, Method, Path string
	PathBase64       *string
	Headers          []struct {
		Name, Value string
		ValueBase64 *string
	}
	BodyBase64     string
	BodySize       int
	Complete       bool
	ResponseStatus *int
}

func (d exportRecord) target() string { return exactBytes(d.Path, d.PathBase64) }

func exactBytes(text string, b64 *string) string {
	if b64 == nil {
		return text
	}
	b, err := base64.StdEncoding.DecodeString(*b64)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// exportRecords reads the Endpoint's deliveries from the API, oldest first.
func exportRecords(t *testing.T, r *harness.Relay, token, id string) []exportRecord {
	t.Helper()
	var out struct {
		Endpoint struct {
			Deliveries struct{ Nodes []exportRecord }
		}
	}
	r.MustGraphQL(t, token, `query($id: ID!){ endpoint(id: $id){ deliveries(first: 20){ nodes{
		id method path pathBase64 headers{ name value valueBase64 } bodyBase64 bodySize complete responseStatus } } } }`,
		map[string]any{"id": id}, &out)
	recs := out.Endpoint.Deliveries.Nodes
	slices.Reverse(recs)
	return recs
}

// nodeFor returns node and the folder of an npm test project with its
// packages installed. Outside CI it skips the test when either is missing;
// in CI (CI=true, where .ci/run installs them) that is a failure.
func nodeFor(t *testing.T, project, pkg string) (node, dir string) {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed (apt-get install nodejs npm)")
	}
	dir = filepath.Join(harness.ModuleRoot(), "systemtest", "testdata", project)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
		missing(pkg + " is not installed: (cd systemtest/testdata/" + project + " && npm ci)")
	}
	return node, dir
}

// harEntryRead is what check.mjs reads from a HAR entry.
type harEntryRead struct {
	ID, StartedDateTime, Method, URL, HTTPVersion string
	Headers, QueryString                          [][2]string
	Body, ResponseBody                            *string // base64 of the bytes
	Status                                        int
	Complete                                      bool
	Comment                                       string
}

// checkHAR loads a HAR file with har-validator; ok is false when the
// validator refused it (its errors are in out).
func checkHAR(t *testing.T, file string) (entries []harEntryRead, out string, ok bool) {
	t.Helper()
	node, dir := nodeFor(t, "har", "har-validator")
	out, code := harness.RunWith(t, harness.Command{Bin: node, Dir: dir}, "check.mjs", file)
	if code != 0 {
		return nil, out, false
	}
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("check.mjs printed no entries: %v\n%s", err, out)
	}
	return entries, out, true
}

// TestExportHARLoadsInHARTools: `relay deliveries export` writes HAR 1.2
// that har-validator (npm) accepts, and what a HAR tool reads from it is
// the recorded request byte for byte: binary and non-UTF-8 bytes, repeated
// headers in order, the query, the answer's binary body, a body stored in
// part said so, and a request still waiting for its answer as status 0.
func TestExportHARLoadsInHARTools(t *testing.T) {
	t.Parallel()
	nodeFor(t, "har", "har-validator") // skip before starting anything
	rig := recordForExport(t)
	file := filepath.Join(t.TempDir(), "shop.har")
	if out, code := rig.home.run(t, "", "deliveries", "export", "shop", "-o", file); code != 0 || !strings.Contains(out, "exported 5 deliveries") ||
		!strings.Contains(out, "1 delivery is stored in part") {
		t.Fatalf("deliveries export exited %d:\n%s", code, out)
	}
	recs := exportRecords(t, rig.r, rig.token, rig.ep.ID)
	if resp := rig.answerSlow(); resp.Status != 200 {
		t.Fatalf("the waiting sender got %d", resp.Status)
	}

	entries, out, ok := checkHAR(t, file)
	if !ok {
		t.Fatalf("har-validator refused the export:\n%s", out)
	}
	if len(entries) != len(exportSamples) {
		t.Fatalf("%d entries, want %d", len(entries), len(exportSamples))
	}
	base := strings.TrimRight(rig.ep.URL, "/")
	for i, e := range entries {
		s, rec := exportSamples[i], recs[i]
		if e.ID != rec.ID || e.Method != s.method || e.HTTPVersion != "HTTP/1.1" {
			t.Errorf("entry %d: %s %s %s, want delivery %s, %s HTTP/1.1 (oldest first)", i, e.ID, e.Method, e.HTTPVersion, rec.ID, s.method)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.StartedDateTime); err != nil {
			t.Errorf("entry %d: startedDateTime %q: %v", i, e.StartedDateTime, err)
		}
		// Every recorded header, in the recorded order, repeats kept.
		var want [][2]string
		for _, h := range rec.Headers {
			want = append(want, [2]string{h.Name, h.Value})
		}
		if !slices.Equal(e.Headers, want) {
			t.Errorf("entry %d headers %q, want %q", i, e.Headers, want)
		}
		body := decodedOrNil(e.Body)
		stored, _ := base64.StdEncoding.DecodeString(rec.BodyBase64)
		if !bytes.Equal(body, stored) || (len(s.body) > 0) != (e.Body != nil) {
			t.Errorf("entry %d: a HAR tool reads the body %q, want %q", i, body, stored)
		}
	}

	binary := entries[0]
	if binary.URL != base+"/hooks/caf%E9?x=1&x=2&q=a%20b" {
		t.Errorf("url %q", binary.URL)
	}
	if want := [][2]string{{"x", "1"}, {"x", "2"}, {"q", "a b"}}; !slices.Equal(binary.QueryString, want) {
		t.Errorf("queryString %q, want %q", binary.QueryString, want)
	}
	if got := headerValues(binary.Headers, "X-Sig"); !slices.Equal(got, []string{"t=1,v1=one", "two"}) {
		t.Errorf("X-Sig values %q, want both in order", got)
	}
	if b := decodedOrNil(binary.ResponseBody); binary.Status != 201 || !bytes.Equal(b, pngBytes) {
		t.Errorf("response %d %q, want 201 with the PNG bytes", binary.Status, b)
	}
	if q := entries[2].QueryString; !slices.Equal(q, [][2]string{{"empty", ""}, {"flag", ""}, {"s", "✓"}}) {
		t.Errorf("GET queryString %q", q)
	}
	if big := entries[3]; big.Complete || !strings.Contains(big.Comment, "stored 1.0 KiB of 2.9 KiB (incomplete)") {
		t.Errorf("the body stored in part: complete %v, comment %q; want it said", big.Complete, big.Comment)
	}
	if slow := entries[4]; slow.Status != 0 || slow.ResponseBody != nil {
		t.Errorf("the waiting request: status %d, body %v; want status 0 and no content", slow.Status, slow.ResponseBody)
	}

	// What HAR has no field for is in the document itself: the exact bytes
	// of the header value and path that are not UTF-8, and the encoding.
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Log struct {
			Entries []struct {
				Request struct {
					Headers []struct {
						Name        string
						ValueBase64 *string `json:"_valueBase64"`
					}
					PostData struct{ Encoding string }
				}
				Relay struct {
					PathBase64 *string
					Complete   bool
					Incomplete string
				} `json:"_relay"`
			}
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	first := doc.Log.Entries[0]
	if first.Request.PostData.Encoding != "base64" || exactBytes("", first.Relay.PathBase64) != exportSamples[0].target {
		t.Errorf("binary entry: postData.encoding %q, _relay.pathBase64 %v", first.Request.PostData.Encoding, first.Relay.PathBase64)
	}
	for _, h := range first.Request.Headers {
		if h.Name == "X-Latin" && exactBytes("", h.ValueBase64) != "caf\xe9" {
			t.Errorf("X-Latin _valueBase64 %v, want the bytes of caf\\xe9", h.ValueBase64)
		}
	}
	if big := doc.Log.Entries[3].Relay; big.Complete || big.Incomplete == "" {
		t.Errorf("_relay of the body stored in part: %+v", big)
	}

	// The filters, to stdout: the newest 2xx delivery only.
	out, code := rig.home.run(t, "", "deliveries", "export", rig.ep.ID, "--status", "2xx", "--limit", "1", "--since", "1h")
	if code != 0 {
		t.Fatalf("export to stdout exited %d:\n%s", code, out)
	}
	stdoutFile := filepath.Join(t.TempDir(), "stdout.har")
	if err := os.WriteFile(stdoutFile, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if filtered, out, ok := checkHAR(t, stdoutFile); !ok || len(filtered) != 1 || filtered[0].ID != recs[4].ID {
		t.Errorf("export --status 2xx --limit 1: %s", out)
	}

	// The check can fail: a document without its version is refused.
	broken := filepath.Join(t.TempDir(), "broken.har")
	if err := os.WriteFile(broken, bytes.Replace(raw, []byte(`"version":"1.2",`), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, out, ok := checkHAR(t, broken); ok || !strings.Contains(out, "version") {
		t.Errorf("har-validator accepted a HAR without log.version:\n%s", out)
	}
}

// decodedOrNil is the bytes of a base64 text, nil for none.
func decodedOrNil(b64 *string) []byte {
	if b64 == nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(*b64)
	if err != nil {
		panic(err)
	}
	return b
}

func headerValues(hs [][2]string, name string) []string {
	var out []string
	for _, h := range hs {
		if h[0] == name {
			out = append(out, h[1])
		}
	}
	return out
}

// rawCapture is a TCP server that records the bytes of each request as
// they arrived on the socket (net/http only tells where a request ends)
// and answers 200.
type rawCapture struct {
	addr string
	mu   sync.Mutex
	got  [][]byte
}

func startRawCapture(t *testing.T) *rawCapture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c := &rawCapture{addr: ln.Addr().String()}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
				var raw bytes.Buffer
				req, err := http.ReadRequest(bufio.NewReader(io.TeeReader(conn, &raw)))
				if err == nil {
					_, err = io.Copy(io.Discard, req.Body)
				}
				c.mu.Lock()
				c.got = append(c.got, bytes.Clone(raw.Bytes()))
				c.mu.Unlock()
				if err == nil {
					_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
				}
			}()
		}
	}()
	return c
}

func (c *rawCapture) requests() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// TestReplayBundleSendsRecordedBytes: a bundle exported from the relay is
// replayed with the relay stopped, by a user with no login, and the bytes
// a raw TCP server receives are the recorded request exactly: request
// line, the Host of --to, every header in recorded order with repeats and
// nothing added, and the body. A body stored in part is skipped and said
// so; --only picks deliveries; no answer exits 1; a malformed line or a
// bad --to exits 2 and sends nothing.
func TestReplayBundleSendsRecordedBytes(t *testing.T) {
	t.Parallel()
	rig := recordForExport(t)
	if resp := rig.answerSlow(); resp.Status != 200 {
		t.Fatalf("the waiting sender got %d", resp.Status)
	}
	bundle := filepath.Join(t.TempDir(), "shop.bundle")
	if out, code := rig.home.run(t, "", "deliveries", "export", "shop", "--format", "bundle", "-o", bundle); code != 0 {
		t.Fatalf("export --format bundle exited %d:\n%s", code, out)
	}
	recs := exportRecords(t, rig.r, rig.token, rig.ep.ID)
	rig.r.Stop(t)

	capture := startRawCapture(t)
	nobody := newCLIHome(t)
	out, code := nobody.run(t, "", "replay", bundle, "--to", "http://"+capture.addr)
	if code != 0 {
		t.Fatalf("replay exited %d:\n%s", code, out)
	}
	var want [][]byte
	for _, rec := range recs {
		if !rec.Complete {
			if !regexp.MustCompile(`POST /big  skipped: body stored in part \(1024 of 3000 bytes\)  delivery ` + rec.ID).MatchString(out) {
				t.Errorf("replay did not say it skipped %s:\n%s", rec.ID, out)
			}
			continue
		}
		if !strings.Contains(out, " → 200  delivery "+rec.ID+"\n") {
			t.Errorf("replay printed no line for %s:\n%s", rec.ID, out)
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", rec.Method, rec.target(), capture.addr)
		for _, h := range rec.Headers {
			fmt.Fprintf(&b, "%s: %s\r\n", h.Name, exactBytes(h.Value, h.ValueBase64))
		}
		b.WriteString("\r\n")
		body, _ := base64.StdEncoding.DecodeString(rec.BodyBase64)
		b.Write(body)
		want = append(want, b.Bytes())
	}
	if !strings.Contains(out, "4 sent, 1 skipped, 0 without an answer") {
		t.Errorf("replay summary:\n%s", out)
	}
	got := capture.requests()
	if len(got) != len(want) {
		t.Fatalf("the server got %d requests, want %d:\n%q", len(got), len(want), got)
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("request %d arrived as\n%q\nrecorded as\n%q", i, got[i], want[i])
		}
	}
	// The sample with repeated headers really has them, in order.
	if !bytes.Contains(got[0], []byte("X-Sig: t=1,v1=one\r\nX-Sig: two\r\n")) || !bytes.Contains(got[0], []byte("X-Latin: caf\xe9\r\n")) {
		t.Errorf("repeated or binary headers lost:\n%q", got[0])
	}

	// --only, repeatable.
	out, code = nobody.run(t, "", "replay", bundle, "--to", "http://"+capture.addr+"/", "--only", recs[1].ID, "--only", recs[2].ID)
	if code != 0 || strings.Count(out, "→ 200") != 2 || len(capture.requests()) != len(want)+2 {
		t.Errorf("replay --only exited %d, sent %d:\n%s", code, len(capture.requests())-len(want), out)
	}

	closed := "http://127.0.0.1:" + strconv.Itoa(harness.ClosedPort(t))
	bad := filepath.Join(t.TempDir(), "bad.bundle")
	lines := strings.SplitAfter(readString(t, bundle), "\n")
	hostile := `{"id":"x","method":"GET","path":"/ HTTP/1.1\r\nHost: evil\r\n\r\nGET /admin","headers":[],"bodyBase64":"","complete":true}` + "\n"
	if err := os.WriteFile(bad, []byte(strings.Join(lines[:3], "")+hostile+strings.Join(lines[3:], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	notBundle := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notBundle, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(capture.requests())
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"nothing listening", []string{"replay", bundle, "--to", closed}, 1, "connection refused"},
		{"a request smuggled into a line", []string{"replay", bad, "--to", "http://" + capture.addr}, 2, "bundle line 4: path"},
		{"not a bundle", []string{"replay", notBundle, "--to", "http://" + capture.addr}, 2, "bundle line 1: not a relay bundle"},
		{"no such file", []string{"replay", filepath.Join(t.TempDir(), "nope"), "--to", "http://" + capture.addr}, 2, "no bundle file "},
		{"bad --to", []string{"replay", bundle, "--to", "ftp://" + capture.addr}, 2, "--to"},
		{"no --to", []string{"replay", bundle}, 2, "--to is required"},
		{"unknown --only", []string{"replay", bundle, "--to", "http://" + capture.addr, "--only", "nope"}, 2, "--only nope: no such delivery"},
	} {
		out, code := nobody.run(t, "", tt.args...)
		if code != tt.code || !strings.Contains(out, tt.want) {
			t.Errorf("%s: relay %v exited %d, want %d and output containing %q:\n%s", tt.name, tt.args, code, tt.code, tt.want, out)
		}
	}
	if n := len(capture.requests()) - before; n != 0 {
		t.Errorf("refused replays sent %d requests", n)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitNewest waits until the inspector id's history shows path as its
// newest delivery: the views apply the log in order, so every delivery
// answered before it is there too.
func waitNewest(t *testing.T, r *harness.Relay, id, path string) {
	t.Helper()
	var newest string
	harness.Eventually(t, 15*time.Second, "the history to show "+path+" as the newest delivery", func() bool {
		var out struct {
			Inspector struct {
				Deliveries struct{ Nodes []struct{ Path string } }
			}
		}
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(first: 1){ nodes{ path } } } }`, map[string]any{"id": id}, &out)
		if n := out.Inspector.Deliveries.Nodes; len(n) == 1 {
			newest = n[0].Path
		}
		return newest == path
	})
}

// TestExportPagesThroughHistory: an export without an account reads an
// inspector's history past a page of ids (100) and in many batches, and
// writes the newest --limit deliveries oldest first. With API answers
// capped at 1 MiB, a batch of large bodies is refused as too large and
// read again one delivery at a time, as it would be with large captured
// responses.
func TestExportPagesThroughHistory(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--address-rate", "off", "--max-api-answer", "1MiB")
	server := "http://127.0.0.1:" + strconv.Itoa(r.Port)
	export := func(t *testing.T, id string, limit, want int) []string {
		t.Helper()
		out, code := newCLIHome(t).run(t, "", "deliveries", "export", id, "--server", server, "--format", "bundle", "--limit", strconv.Itoa(limit))
		if code != 0 {
			t.Fatalf("export exited %d:\n%.2000s", code, out)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != want+1 || !strings.HasPrefix(lines[0], `{"relay_bundle":1,`) {
			t.Fatalf("%d lines, want the header and %d deliveries; first: %.200s", len(lines), want, lines[0])
		}
		return lines[1:]
	}
	type line struct {
		Path       string
		BodyBase64 string
		Complete   bool
	}
	decode := func(t *testing.T, i int, l string) line {
		t.Helper()
		var d line
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("line %d: %v", i+2, err)
		}
		return d
	}

	t.Run("past a page of ids", func(t *testing.T) {
		id, _ := createInspector(t, r)
		const sent, limit = 130, 120
		for i := range sent {
			if resp := send(t, r, id, "POST", "/n/"+strconv.Itoa(i), nil, []byte(strconv.Itoa(i))); resp.Status != 204 {
				t.Fatalf("request %d: %d", i, resp.Status)
			}
		}
		// The history follows the log a few milliseconds behind the
		// senders' answers: the export reads it once it holds the last.
		waitNewest(t, r, id, "/n/"+strconv.Itoa(sent-1))
		for i, l := range export(t, id, limit, limit) {
			n := sent - limit + i
			if d := decode(t, i, l); d.Path != "/n/"+strconv.Itoa(n) || d.BodyBase64 != base64.StdEncoding.EncodeToString([]byte(strconv.Itoa(n))) {
				t.Fatalf("line %d: %+v, want /n/%d", i+2, d, n)
			}
		}
	})

	t.Run("a batch too large for one answer", func(t *testing.T) {
		id, _ := createInspector(t, r)
		const sent = 9
		body := bytes.Repeat([]byte("b"), 200<<10)
		for i := range sent {
			if resp := send(t, r, id, "POST", "/big/"+strconv.Itoa(i), nil, body); resp.Status != 204 {
				t.Fatalf("request %d: %d", i, resp.Status)
			}
		}
		waitNewest(t, r, id, "/big/"+strconv.Itoa(sent-1))
		// Eight 200 KiB bodies are more than the 1 MiB answer.
		res := r.GraphQL(t, "", `query($a: ID!){ inspector(id: $a){ deliveries(first: 8){ nodes{ bodyBase64 } } } }`, map[string]any{"a": id})
		if len(res.Errors) == 0 || res.Errors[0].Code() != "ANSWER_TOO_LARGE" {
			t.Fatalf("a batch of eight bodies was answered: %.300s", res)
		}
		for i, l := range export(t, id, 100, sent) {
			if d := decode(t, i, l); d.Path != "/big/"+strconv.Itoa(i) || !d.Complete || d.BodyBase64 != base64.StdEncoding.EncodeToString(body) {
				t.Fatalf("line %d: %s (complete %v, %d bytes of base64), want /big/%d whole", i+2, d.Path, d.Complete, len(d.BodyBase64), i)
			}
		}
	})
}
