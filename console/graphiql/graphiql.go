package graphiql

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"net/http"
	"path"
	"strings"

	"github.com/99designs/gqlgen/graphql/playground"
)

//go:embed assets
var assets embed.FS

// The embedded files, by the names they are served under.
const (
	graphiqlJS  = "graphiql.min.js"
	graphiqlCSS = "graphiql.min.css"
	reactJS     = "react.production.min.js"
	reactDOMJS  = "react-dom.production.min.js"
)

// contentTypes lists every servable file; anything else is not found.
var contentTypes = map[string]string{
	graphiqlJS:  "text/javascript; charset=utf-8",
	graphiqlCSS: "text/css; charset=utf-8",
	reactJS:     "text/javascript; charset=utf-8",
	reactDOMJS:  "text/javascript; charset=utf-8",
}

// AssetsHandler serves the embedded files by their base name, so it works
// whether or not the mount prefix (e.g. "/assets/graphiql/") is stripped.
func AssetsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := path.Base(r.URL.Path)
		ct, ok := contentTypes[name]
		if !ok {
			http.Error(w, "no such asset", http.StatusNotFound)
			return
		}
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			http.Error(w, "asset unreadable", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// The files change only with a relay upgrade; a day of caching is safe.
		w.Header().Set("Cache-Control", "public, max-age=86400")
		if r.Method == http.MethodGet {
			_, _ = w.Write(b)
		}
	})
}

// PlaygroundOptions points gqlgen's GraphiQL page at the embedded files
// served under prefix (where AssetsHandler is mounted), with subresource
// integrity hashes computed from those same bytes. The explorer plugin is
// disabled because its build is not vendored.
func PlaygroundOptions(prefix string) []playground.GraphiqlConfigOption {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return []playground.GraphiqlConfigOption{
		playground.WithGraphiqlVersion(prefix+graphiqlJS, prefix+graphiqlCSS, SRI(graphiqlJS), SRI(graphiqlCSS)),
		playground.WithGraphiqlReactVersion(prefix+reactJS, prefix+reactDOMJS, SRI(reactJS), SRI(reactDOMJS)),
		playground.WithGraphiqlEnablePluginExplorer(false),
	}
}

// SRI returns the subresource integrity string ("sha256-<base64>") of the
// embedded file name, or "" when there is no such file.
func SRI(name string) string {
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}
