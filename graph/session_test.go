package graph_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/relayhq/relay/graph"
)

// sessionOf is the session cookie a browser holds for srv after signing up.
func sessionOf(t *testing.T, b *browser) string {
	t.Helper()
	u, _ := url.Parse(b.url)
	for _, c := range b.c.Jar.Cookies(u) {
		if strings.HasSuffix(c.Name, "relay_session") {
			return c.Value
		}
	}
	t.Fatal("no session cookie after sign-up")
	return ""
}

// meWith asks who the request is signed in as, with exactly the Cookie
// header given; "" when nobody.
func meWith(t *testing.T, client *http.Client, base, cookie string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader([]byte(`{"query":"{ me { name } }"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Cookie", cookie)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Data struct{ Me *struct{ Name string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if a.Data.Me == nil {
		return ""
	}
	return a.Data.Me.Name
}

// TestSessionCookieTossing: a cookie another host of the site tossed in
// (a second relay_session, with a Domain or a narrower Path) signs the
// request out instead of choosing between the two; over HTTPS only the
// __Host- name counts, over plain HTTP only the plain one; and a host
// served WithoutCookies (the bare domain beside --console-url) reads no
// cookie and refuses a password sign-in with the console's URL.
func TestSessionCookieTossing(t *testing.T) {
	e := newEnv(t)
	plain := httptest.NewServer(e.h)
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(e.h)
	t.Cleanup(secure.Close)
	const console = "https://console.example.com"
	apiOnly := httptest.NewServer(graph.WithoutCookies(console, e.h))
	t.Cleanup(apiOnly.Close)

	ann, eve := newBrowser(t, plain), newBrowser(t, plain)
	ann.signUp("Ann's", "ann@site.test")
	eve.signUp("Eve's", "eve@site.test")
	annS, eveS := sessionOf(t, ann), sessionOf(t, eve)

	tests := []struct {
		name   string
		client *http.Client
		base   string
		cookie string
		want   string
	}{
		{"plain: the one cookie", plain.Client(), plain.URL, "relay_session=" + annS, "Ann's"},
		{"plain: a tossed duplicate first", plain.Client(), plain.URL, "relay_session=" + eveS + "; relay_session=" + annS, ""},
		{"plain: a tossed duplicate last", plain.Client(), plain.URL, "relay_session=" + annS + "; relay_session=" + eveS, ""},
		{"plain: the same cookie twice", plain.Client(), plain.URL, "relay_session=" + annS + "; relay_session=" + annS, ""},
		{"plain: the __Host- name is not read", plain.Client(), plain.URL, "__Host-relay_session=" + annS, ""},
		{"plain: another cookie beside", plain.Client(), plain.URL, "theme=dark; relay_session=" + annS, "Ann's"},
		{"https: the plain name is not read", secure.Client(), secure.URL, "relay_session=" + annS, ""},
		{"https: the __Host- name", secure.Client(), secure.URL, "__Host-relay_session=" + annS, "Ann's"},
		{"https: a plain one beside changes nothing", secure.Client(), secure.URL, "relay_session=" + eveS + "; __Host-relay_session=" + annS, "Ann's"},
		{"https: __Host- twice", secure.Client(), secure.URL, "__Host-relay_session=" + annS + "; __Host-relay_session=" + eveS, ""},
		{"without cookies: none is read", apiOnly.Client(), apiOnly.URL, "relay_session=" + annS, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := meWith(t, tt.client, tt.base, tt.cookie); got != tt.want {
				t.Errorf("Cookie: %s signs in as %q, want %q", strings.ReplaceAll(tt.cookie, annS, "ANN"), got, tt.want)
			}
		})
	}

	b := newBrowser(t, apiOnly)
	a := b.do(`mutation($l: String!, $p: String!) { signIn(login: $l, password: $p) { account { id } } }`,
		map[string]any{"l": "ann@site.test", "p": pw}, nil)
	if a.code() != "INVALID_INPUT" || !strings.Contains(a.Errors[0].Message, console) {
		t.Errorf("sign-in where no cookie is kept: %+v, want INVALID_INPUT naming %s", a.Errors, console)
	}
	if u, _ := url.Parse(apiOnly.URL); len(b.c.Jar.Cookies(u)) != 0 {
		t.Errorf("a host without cookies set one: %v", b.c.Jar.Cookies(u))
	}
}
