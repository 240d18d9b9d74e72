package graphiql

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"

	"github.com/99designs/gqlgen/graphql/playground"
)

// inlineBlock finds the inline <script> and <style> elements of the page
// (the ones without a src), whose hashes the policy allows.
var inlineBlock = regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`)

// Handler serves GraphiQL for the GraphQL endpoint at endpoint, its assets
// under prefix (where AssetsHandler is mounted), with the headers the
// console has: a Content-Security-Policy that allows only the relay's own
// origin and the page's own inline script and style (by hash, so no other
// inline code runs), no framing, and no content sniffing. The page is
// rendered once: gqlgen's template depends only on these arguments.
func Handler(title, endpoint, prefix string) http.Handler {
	rec := httptest.NewRecorder()
	playground.Handler(title, endpoint, PlaygroundOptions(prefix)...).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, endpoint, nil))
	page := rec.Body.Bytes()
	csp := policy(page)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.Method != http.MethodHead {
			_, _ = w.Write(page)
		}
	})
}

// policy is the Content-Security-Policy of page: same-origin resources,
// and the inline scripts and styles it holds, each by its hash. GraphiQL
// sets element styles from script, which style-src does not govern.
func policy(page []byte) string {
	var scripts, styles []string
	for _, m := range inlineBlock.FindAllSubmatch(page, -1) {
		sum := sha256.Sum256(m[2])
		h := fmt.Sprintf("'sha256-%s'", base64.StdEncoding.EncodeToString(sum[:]))
		if bytes.Equal(m[1], []byte("script")) {
			scripts = append(scripts, h)
		} else {
			styles = append(styles, h)
		}
	}
	return "default-src 'self'; " +
		"script-src 'self' " + strings.Join(scripts, " ") + "; " +
		"style-src 'self' " + strings.Join(styles, " ") + "; " +
		"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; " +
		"base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors 'none'"
}
