package agentcli

import (
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"
)

// TestDotSegmentsUnderAPrefix: with a target prefix, a path holding a "."
// or ".." segment in any spelling a local server may resolve is refused
// (400 for the sender, nothing reaches the local server); other paths,
// and every path without a prefix, go as sent.
func TestDotSegmentsUnderAPrefix(t *testing.T) {
	target, requests := recordingServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	for _, tt := range []struct {
		name, prefix, path string
		refused            bool
	}{
		{"parent", "/api", "/../admin", true},
		{"parent deeper", "/api", "/a/b/../../../admin", true},
		{"current", "/api", "/./admin", true},
		{"trailing parent", "/api", "/x/..", true},
		{"encoded parent", "/api", "/%2e%2e/admin", true},
		{"encoded parent, upper case", "/api", "/%2E%2E/admin", true},
		{"half encoded", "/api", "/.%2E/admin", true},
		{"encoded current", "/api", "/%2e/admin", true},
		{"encoded slash around the dots", "/api", "/x%2f..%2fadmin", true},
		{"backslash", "/api", `/..\admin`, true},
		{"encoded backslash", "/api", "/..%5cadmin", true},
		{"path parameter", "/api", "/..;x/admin", true},
		{"dots in the query only", "/api", "/hook?next=/../admin", false},
		{"three dots", "/api", "/.../x", false},
		{"dotted names", "/api", "/a..b/.well-known/x.json", false},
		{"double slash", "/api", "//x/%2F", false},
		{"no prefix: as sent", "", "/../admin", false},
		{"no prefix, encoded: as sent", "", "/%2e%2e/admin", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := httpTarget(target)
			tg.Prefix = tt.prefix
			f := newForwarder(tg, 5*time.Second, false)
			defer f.close()
			res := f.forward(t.Context(), localRequest{Method: "POST", Path: tt.path})
			if !tt.refused {
				if res.Err != nil || res.Status != 204 {
					t.Fatalf("forward %q: %d %v", tt.path, res.Status, res.Err)
				}
				if got := next(t, requests); got.requestURI != tt.prefix+tt.path {
					t.Fatalf("the local server got %q, want %q", got.requestURI, tt.prefix+tt.path)
				}
				return
			}
			var dot *DotSegmentError
			if res.Status != http.StatusBadRequest || !errors.As(res.Err, &dot) || !strings.Contains(res.Failure, ". or ..") || !strings.Contains(res.Failure, tg.String()) {
				t.Fatalf("forward %q: %d %v, failure %q; want 400 refusing the dot-segment", tt.path, res.Status, res.Err, res.Failure)
			}
			if c := report("a", res); c.Status != http.StatusBadRequest || c.Failure != res.Failure {
				t.Fatalf("reported %+v, want status 400 and the failure", c)
			}
			select {
			case got := <-requests:
				t.Fatalf("the local server got %q", got.requestURI)
			default:
			}
		})
	}
}

// FuzzLocalURLStaysUnderThePrefix: whatever path the relay sends, an
// accepted one reaches the local server under the target's prefix, even
// after the server decodes it once and resolves its dot-segments.
func FuzzLocalURLStaysUnderThePrefix(f *testing.F) {
	for _, s := range []string{"/hook", "/../admin", "/%2e%2e/admin", "/x%2F..%2Fy", `/..\x`, "/..;/x", "//x", "/a?b=/../c", "/%zz/..", "*"} {
		f.Add(s)
	}
	tg := Target{Scheme: "http", Host: "localhost:3000", Prefix: "/api"}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := localURL(tg, raw)
		if err != nil || raw == "*" { // OPTIONS *: the server, not a path
			return
		}
		p, _, _ := strings.Cut(u.RequestURI(), "?")
		if !strings.HasPrefix(p, "/api/") && p != "/api" {
			t.Fatalf("localURL(%q) = %q, not under /api", raw, p)
		}
		for _, form := range []string{p, unescapeOnce(p)} {
			form = strings.ReplaceAll(form, `\`, "/")
			if c := path.Clean(form); c != "/api" && !strings.HasPrefix(c, "/api/") {
				t.Fatalf("localURL(%q) = %q resolves to %q, outside /api", raw, p, c)
			}
		}
	})
}

// unescapeOnce decodes a path as a server would, or keeps it when it is
// not valid percent-encoding.
func unescapeOnce(p string) string {
	if d, err := url.PathUnescape(p); err == nil {
		return d
	}
	return p
}
