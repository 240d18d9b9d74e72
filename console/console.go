package console

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed web
var webFS embed.FS

// files is the web folder with its "web/" prefix removed, so request paths map
// onto it directly.
var files = mustSub(webFS, "web")

// csp keeps the console to its own origin: no inline script, no third-party
// host. connect-src 'self' also covers the same-origin WebSocket.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Assets returns the console's static files (style.css and the ES modules
// such as dom.js, format.js and detail.js) rooted at the assets folder, so
// another front end (the desktop agent's window) can reuse its components
// rather than draw them again.
func Assets() fs.FS { return mustSub(files, "assets") }

// Handler returns the console's HTTP handler. Mount it on the bare domain at
// "/": it serves files under "/assets/", the icon at "/favicon.ico", and
// index.html for every other path so that deep links such as "/i/<id>" load
// the app, which then routes on the client. Only GET and HEAD are allowed.
func Handler() http.Handler {
	index := mustRead(files, "index.html")
	icon := mustRead(files, "assets/favicon.svg")
	assets := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// More than one range is answered with the whole file: net/http
		// serves each range as a part of its own, and thousands of
		// one-byte ranges of a module (a 60 KB header) took 180 times the
		// CPU of the file and an answer 100 times its size. Browsers ask
		// for one range, if any.
		if strings.Contains(r.Header.Get("Range"), ",") {
			r.Header.Del("Range")
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// no-cache: the browser revalidates, so a new relay version is picked up
		// at once; the files are small.
		h.Set("Cache-Control", "no-cache")
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/assets/") && !strings.HasSuffix(p, "/"):
			assets.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/assets/"):
			// No directory listings.
			http.Error(w, "no such asset", http.StatusNotFound)
		case p == "/favicon.ico":
			serveBytes(w, r, "image/svg+xml", icon)
		default:
			h.Set("Content-Security-Policy", csp)
			serveBytes(w, r, "text/html; charset=utf-8", index)
		}
	})
}

// serveBytes answers with an in-memory file; ServeContent handles HEAD and
// range requests.
func serveBytes(w http.ResponseWriter, r *http.Request, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	http.ServeContent(w, r, path.Base(r.URL.Path), time.Time{}, bytes.NewReader(b))
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		// The embed directive guarantees the folder; failing here is a build defect.
		panic("console: embedded folder missing: " + err.Error())
	}
	return sub
}

func mustRead(f fs.FS, name string) []byte {
	b, err := fs.ReadFile(f, name)
	if err != nil {
		panic("console: embedded file missing: " + err.Error())
	}
	return b
}
