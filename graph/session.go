package graph

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/internal/forwarded"
)

// Session cookies. A member's browser holds its session token in an
// HttpOnly cookie (scripts cannot read it), SameSite=Strict (no other site
// makes the browser send it), Path=/, Secure whenever the request came
// over HTTPS; over HTTPS it is named with the __Host- prefix, which
// browsers only accept from a secure origin, for this host alone.
const (
	SessionCookie       = "relay_session"
	secureSessionCookie = "__Host-relay_session"
)

// cookieJar lets a resolver set or clear the session cookie of the HTTP
// answer it is part of (nil over WebSocket, which cannot).
type cookieJar struct {
	w      http.ResponseWriter
	secure bool
}

// fromHTTPS tells whether the request came over HTTPS: TLS to the relay,
// or a trusted proxy saying so (or --public-url's https when none tells).
func fromHTTPS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	c, ok := forwarded.FromContext(r.Context())
	return ok && c.Proto == "https"
}

func (j *cookieJar) name() string {
	if j.secure {
		return secureSessionCookie
	}
	return SessionCookie
}

// set makes the answer sign the browser in until expires.
func (j *cookieJar) set(token string, expires time.Time) {
	http.SetCookie(j.w, &http.Cookie{Name: j.name(), Value: token, Path: "/", Expires: expires,
		MaxAge: max(1, int(time.Until(expires).Seconds())), HttpOnly: true, Secure: j.secure, SameSite: http.SameSiteStrictMode})
}

// clear makes the browser forget its session cookie.
func (j *cookieJar) clear() {
	http.SetCookie(j.w, &http.Cookie{Name: j.name(), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: j.secure, SameSite: http.SameSiteStrictMode})
}

// jar is the request's cookieJar, or nil.
func jar(ctx context.Context) *cookieJar {
	j, _ := ctx.Value(jarKey).(*cookieJar)
	return j
}

// maxSessionCookie bounds the cookie value read: a session token is about
// 50 bytes, and nothing longer is looked up.
const maxSessionCookie = 200

// sessionCookie is the session token a request's cookie carries, or "".
// Over HTTPS only the __Host- name counts: a browser takes that name only
// from this very host over HTTPS with Path=/ and no Domain, so no other
// host (an address page on a subdomain) can set it. Over plain HTTP only
// the plain name counts, and when it is sent more than once the request is
// signed out: a second cookie of that name is one another host of the
// site set with a Domain or a narrower Path (cookie tossing), and picking
// either could make the console run as a stranger.
func sessionCookie(r *http.Request) string {
	name := SessionCookie
	if fromHTTPS(r) {
		name = secureSessionCookie
	}
	var value string
	n := 0
	for _, c := range r.Cookies() {
		if c.Name == name {
			n++
			value = c.Value
		}
	}
	if n != 1 || value == "" || len(value) > maxSessionCookie {
		return ""
	}
	return value
}

// WithoutCookies serves the API on a host that keeps no browser session:
// the bare domain when the console has a host of its own (--console-url).
// Session cookies there are neither read nor set, since any address page
// of the domain can set one; tokens work as everywhere. A sign-in there
// is refused with the console's URL.
func WithoutCookies(consoleURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), noCookiesKey, consoleURL)))
	})
}

// sameOrigin tells whether a WebSocket upgrade comes from a page of this
// relay: its Origin names the host the request is for. Browsers always
// send Origin on a WebSocket; a socket from another page must not ride on
// the cookie the browser attaches.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// crossOrigin refuses state-changing requests from other origins
// (Sec-Fetch-Site, then Origin against Host); requests without either
// header (curl, the CLI) are not from a browser and pass.
var crossOrigin = http.NewCrossOriginProtection()

// cookieCredential reads a request's session cookie into its context,
// when the request carries no bearer token. A POST with the cookie must be
// same-origin (net/http's CrossOriginProtection), and a WebSocket upgrade
// uses the cookie only when its Origin is this relay: requests carrying a
// bearer token are unaffected, a browser adds no Authorization header by
// itself.
func cookieCredential(w http.ResponseWriter, r *http.Request, ctx context.Context) (context.Context, bool) {
	if err := crossOrigin.Check(r); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"errors":[{"message":"cross-origin request refused: use the relay's own console, or a bearer token","extensions":{"code":"FORBIDDEN"}}]}`))
		return ctx, false
	}
	tok := sessionCookie(r)
	if tok == "" || (websocket.IsWebSocketUpgrade(r) && !sameOrigin(r)) {
		return ctx, true
	}
	return context.WithValue(ctx, tokenKey, tok), true
}
