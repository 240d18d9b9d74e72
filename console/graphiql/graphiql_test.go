package graphiql_test

import (
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql/playground"

	"github.com/relayhq/relay/console/graphiql"
)

func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/assets/graphiql/", graphiql.AssetsHandler())
	mux.Handle("/graphiql", playground.Handler("Relay GraphQL", "/graphql", graphiql.PlaygroundOptions("/assets/graphiql/")...))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return res, b
}

var (
	absoluteURL = regexp.MustCompile(`https?://`)
	// Each asset tag carries src or href and then its integrity attribute.
	assetRef = regexp.MustCompile(`(?s)(?:src|href)="([^"]+)"\s+integrity="([^"]*)"`)
)

func TestPlaygroundLoadsOnlyLocalAssets(t *testing.T) {
	srv := newServer(t)
	res, page := get(t, srv.URL+"/graphiql")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("playground status = %d", res.StatusCode)
	}
	if m := absoluteURL.Find(page); m != nil {
		t.Fatalf("playground page references an absolute URL %q:\n%s", m, page)
	}
	refs := assetRef.FindAllSubmatch(page, -1)
	if len(refs) != 4 {
		t.Fatalf("found %d asset references, want 4 (graphiql js+css, react, react-dom):\n%s", len(refs), page)
	}
	for _, ref := range refs {
		url, integrity := html.UnescapeString(string(ref[1])), html.UnescapeString(string(ref[2]))
		if !strings.HasPrefix(url, "/assets/graphiql/") {
			t.Errorf("asset %q is not under the mount prefix", url)
			continue
		}
		res, body := get(t, srv.URL+url)
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d", url, res.StatusCode)
			continue
		}
		if len(body) < 1000 {
			t.Errorf("GET %s: only %d bytes", url, len(body))
		}
		sum := sha256.Sum256(body)
		if want := "sha256-" + base64.StdEncoding.EncodeToString(sum[:]); integrity != want {
			t.Errorf("%s: integrity %q, served bytes hash to %q", url, integrity, want)
		}
	}
	if strings.Contains(string(page), "GraphiQLPluginExplorer") {
		t.Error("the explorer plugin is enabled but not vendored")
	}
}

// The hashes gqlgen v0.17.90 pins for its CDN defaults: matching them proves
// the vendored files are the unmodified upstream builds.
func TestEmbeddedFilesAreUpstreamBuilds(t *testing.T) {
	tests := []struct {
		name, sri string
	}{
		{"graphiql.min.js", "sha256-hnImuor1znlJkD/FOTL3jayfS/xsyNoP04abi8bFJWs="},
		{"graphiql.min.css", "sha256-MEh+B2NdMSpj9kexQNN3QKc8UzMrCXW/Sx/phcpuyIU="},
		{"react.production.min.js", "sha256-S0lp+k7zWUMk2ixteM6HZvu8L9Eh//OVrt+ZfbCpmgY="},
		{"react-dom.production.min.js", "sha256-IXWO0ITNDjfnNXIu5POVfqlgYoop36bDzhodR6LW5Pc="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := graphiql.SRI(tt.name); got != tt.sri {
				t.Errorf("SRI(%q) = %q, want %q", tt.name, got, tt.sri)
			}
		})
	}
}

func TestAssetsHandlerRefusals(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name, method, path string
		want               int
		contentType        string
	}{
		{"js", http.MethodGet, "/assets/graphiql/graphiql.min.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"css", http.MethodGet, "/assets/graphiql/graphiql.min.css", http.StatusOK, "text/css; charset=utf-8"},
		{"head", http.MethodHead, "/assets/graphiql/react.production.min.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"unknown file", http.MethodGet, "/assets/graphiql/nope.js", http.StatusNotFound, ""},
		{"source map not vendored", http.MethodGet, "/assets/graphiql/graphiql.min.js.map", http.StatusNotFound, ""},
		{"post", http.MethodPost, "/assets/graphiql/graphiql.min.js", http.StatusMethodNotAllowed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tt.method, tt.path, err)
			}
			res.Body.Close()
			if res.StatusCode != tt.want {
				t.Errorf("%s %s: status %d, want %d", tt.method, tt.path, res.StatusCode, tt.want)
			}
			if tt.contentType != "" && res.Header.Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type = %q, want %q", res.Header.Get("Content-Type"), tt.contentType)
			}
		})
	}
}
