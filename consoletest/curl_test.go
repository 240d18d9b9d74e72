package consoletest

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

type header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type recorded struct {
	ID         string   `json:"id"`
	Method     string   `json:"method"`
	Path       string   `json:"path"`
	Headers    []header `json:"headers"`
	BodyBase64 string   `json:"bodyBase64"`
}

// deliveries waits until an inspector's history holds n deliveries (the
// views catch up with the log asynchronously) and returns them, newest first.
func deliveries(t *testing.T, id string, n int) []recorded {
	t.Helper()
	var nodes []recorded
	harness.Eventually(t, 20*time.Second, fmt.Sprintf("%d deliveries in inspector %s", n, id), func() bool {
		var out struct {
			Inspector struct {
				Deliveries struct{ Nodes []recorded } `json:"deliveries"`
			} `json:"inspector"`
		}
		srv.MustGraphQL(t, "", `query($id: ID!) { inspector(id: $id) { deliveries(first: 10) {
			nodes { id method path headers { name value } bodyBase64 } } } }`, map[string]any{"id": id}, &out)
		nodes = out.Inspector.Deliveries.Nodes
		return len(nodes) >= n
	})
	return nodes
}

// headerLines is the request's headers as "name: value" lines, names
// lowercased and sorted, each name's repeated values in their order, without
// the headers curl derives from the URL and the body.
func headerLines(r recorded) []string {
	values := map[string][]string{}
	for _, h := range r.Headers {
		name := strings.ToLower(h.Name)
		if name == "host" || name == "content-length" {
			continue
		}
		values[name] = append(values[name], h.Value)
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(values)) {
		for _, v := range values[name] {
			lines = append(lines, name+": "+v)
		}
	}
	return lines
}

// "Copy as curl" reproduces a request byte for byte: running the copied
// command records a delivery equal to the original (method, raw path, every
// header with its repeats, body), for a binary and for a text body.
func TestCopyAsCurlReplaysExactly(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (Debian: apt-get install curl)")
	}
	tests := []struct {
		name, method, path string
		header             http.Header
		body               []byte
	}{
		{
			name:   "binary body",
			method: http.MethodPatch,
			path:   "/a//b/../c/?x=[1]&y={z}&q=it's%20ok",
			header: http.Header{
				"Content-Type": {"application/octet-stream"},
				"X-Multi":      {"one", "two", "one"},
				"X-Quote":      {`it's "quoted" $HOME`},
				"X-Empty":      {""},
			},
			body: []byte("\x00\xff\xfe'binary'\n\x01 end"),
		},
		{
			name:   "text body",
			method: http.MethodPost,
			path:   "/hooks/text",
			header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
			body:   []byte("line one\nit's line 'two' with $VAR and `cmd`\n"),
		},
	}
	p := newPage(t, 1280, 800)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := newInspector(t)
			send(t, id, tt.method, tt.path, tt.header, tt.body)
			before := deliveries(t, id, 1)
			original := before[0]
			if original.Path != tt.path {
				t.Fatalf("recorded path %q, want %q", original.Path, tt.path)
			}

			command := p.copyCurl(id, tt.path)
			runShell(t, t.TempDir(), command)

			after := deliveries(t, id, len(before)+1)
			replay := after[0]
			if replay.Method != original.Method || replay.Path != original.Path {
				t.Errorf("replayed %s %s, want %s %s", replay.Method, replay.Path, original.Method, original.Path)
			}
			if replay.BodyBase64 != original.BodyBase64 {
				got, _ := base64.StdEncoding.DecodeString(replay.BodyBase64)
				t.Errorf("replayed body %q, want %q", got, tt.body)
			}
			if got, want := headerLines(replay), headerLines(original); !slices.Equal(got, want) {
				t.Errorf("replayed headers differ\n got: %q\nwant: %q\ncommand:\n%s", got, want, command)
			}
		})
	}
}

// copyCurl opens the delivery with this raw path on an inspector's page,
// clicks "Copy as curl" and returns what it copied.
func (p *page) copyCurl(id, path string) string {
	p.t.Helper()
	p.open("/i/" + id)
	p.openRow(path)
	eval[bool](p, `(() => { window.copied = undefined; navigator.clipboard.writeText = async (s) => { window.copied = s; }; return true; })()`)
	p.click(`[data-testid=copy-curl]`)
	p.waitFor("the copied command", `typeof window.copied === 'string'`)
	return eval[string](p, `window.copied`)
}

// runShell runs a copied command with POSIX sh in dir, with extra curl
// options appended (the command ends with curl's options), as a developer
// who pastes it would.
func runShell(t *testing.T, dir, command string, curlOptions ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := command + " --silent --show-error --fail --max-time 10 " + strings.Join(curlOptions, " ")
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("copied command failed: %v\n%s\ncommand:\n%s", err, out, command)
	}
}

// captured is a request as a capture server received it.
type captured struct {
	method, target string
	header         http.Header
	body           []byte
}

// captureServer answers 204 to everything on 127.0.0.1 and hands over each
// request it received.
func captureServer(t *testing.T) (*httptest.Server, <-chan captured) {
	t.Helper()
	got := make(chan captured, 16)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- captured{method: r.Method, target: r.RequestURI, header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s, got
}

// "Copy as curl" sends the recorded bytes and nothing else, whatever the
// sender put in them: a body that names a local file for curl ("@.env",
// "@-"), a binary body with NUL, CR and escape bytes, and a header value and
// a path full of quotes and command substitutions. The copied command runs
// through sh, in a folder holding a .env, against a capture server.
func TestCopyAsCurlSendsOnlyTheRecordedBytes(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (Debian: apt-get install curl)")
	}
	const secret = "RELAY_TEST_SECRET=must-not-leave-the-machine"
	tests := []struct {
		name, path string
		header     http.Header
		body       []byte
	}{
		{
			name:   "body naming a local file",
			path:   "/hooks/file",
			header: http.Header{"Content-Type": {"text/plain"}},
			body:   []byte("@.env"),
		},
		{
			name: "body naming standard input",
			path: "/hooks/stdin",
			body: []byte("@-"),
		},
		{
			name:   "binary body",
			path:   "/hooks/binary",
			header: http.Header{"Content-Type": {"application/octet-stream"}},
			body:   []byte("@\x00\xff\r\n\t\x1b[31m'\"$(touch pwned)`touch pwned`\\\r\n"),
		},
		{
			name: "header and path with quotes and substitutions",
			path: "/x/$(touch%20pwned)/it's/`id`?q=$HOME&r='\"",
			header: http.Header{
				"X-Evil":       {`'"$(touch pwned)"' ` + "`touch pwned` $HOME \\ '; touch pwned; '"},
				"Content-Type": {"text/plain; charset=utf-8"},
			},
			body: []byte("it's $(touch pwned) and `touch pwned`\n"),
		},
	}
	capture, got := captureServer(t)
	port := capture.Listener.Addr().(*net.TCPAddr).Port
	p := newPage(t, 1280, 800)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := newInspector(t)
			send(t, id, http.MethodPost, tt.path, tt.header, tt.body)
			original := deliveries(t, id, 1)[0]
			if original.Path != tt.path {
				t.Fatalf("recorded path %q, want %q", original.Path, tt.path)
			}
			recordedBody, err := base64.StdEncoding.DecodeString(original.BodyBase64)
			if err != nil || !bytes.Equal(recordedBody, tt.body) {
				t.Fatalf("recorded body %q (%v), want %q", recordedBody, err, tt.body)
			}

			command := p.copyCurl(id, tt.path)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			// Every host the command names goes to the capture server.
			runShell(t, dir, command, fmt.Sprintf("--connect-to ::127.0.0.1:%d", port))

			var r captured
			select {
			case r = <-got:
			default:
				t.Fatalf("the capture server received nothing\ncommand:\n%s", command)
			}
			if !bytes.Equal(r.body, recordedBody) {
				t.Errorf("sent body %q, want the recorded %q\ncommand:\n%s", r.body, recordedBody, command)
			}
			if bytes.Contains(r.body, []byte(secret)) {
				t.Errorf("the command uploaded the local .env")
			}
			if r.method != original.Method || r.target != original.Path {
				t.Errorf("sent %s %s, want %s %s", r.method, r.target, original.Method, original.Path)
			}
			var sent recorded
			for name, values := range r.header {
				for _, v := range values {
					sent.Headers = append(sent.Headers, header{name, v})
				}
			}
			if got, want := headerLines(sent), headerLines(original); !slices.Equal(got, want) {
				t.Errorf("sent headers differ\n got: %q\nwant: %q\ncommand:\n%s", got, want, command)
			}
			if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
				t.Errorf("the command ran a command substitution from the request\ncommand:\n%s", command)
			}
		})
	}
}
