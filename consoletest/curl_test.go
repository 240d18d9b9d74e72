package consoletest

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

type recorded struct {
	ID      string `json:"id"`
	Method  string `json:"method"`
	Path    string `json:"path"`
	Headers []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"headers"`
	BodyBase64 string `json:"bodyBase64"`
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
		t.Skip("curl is not installed")
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

			p.open("/i/" + id)
			p.openRow(tt.path)
			// Capture what the button copies.
			eval[bool](p, `(() => { navigator.clipboard.writeText = async (s) => { window.copied = s; }; return true; })()`)
			p.click(`[data-testid=copy-curl]`)
			p.waitFor("the copied command", `typeof window.copied === 'string'`)
			command := eval[string](p, `window.copied`)

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "bash", "-c", command+" --silent --show-error --fail --max-time 10").CombinedOutput()
			if err != nil {
				t.Fatalf("copied command failed: %v\n%s\ncommand:\n%s", err, out, command)
			}

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
