package graph_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ratelimit"
)

type tokenRow struct {
	ID, Name   string
	CreatedAt  string
	LastUsedAt *string
	ExpiresAt  *string
	Current    bool
}

func bearerOpt(tok string) client.Option { return client.AddHeader("Authorization", "Bearer "+tok) }

func (e *env) signUp(t *testing.T, name string) string {
	t.Helper()
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation($n: String!) { signUp(name: $n) { token } }`, &su, client.Var("n", name))
	return su.SignUp.Token
}

// signedUpAccount is an account a test signed up, with one Endpoint.
type signedUpAccount struct {
	token, id, endpoint string
	auth                client.Option // its token as a bearer
}

// accountWithEndpoint signs up the account "ada" and creates in it one
// Endpoint of input (createEndpoint's input, as GraphQL).
func (e *env) accountWithEndpoint(t *testing.T, input string) signedUpAccount {
	t.Helper()
	var su struct {
		SignUp struct {
			Token   string
			Account struct{ ID string }
		}
	}
	e.c.MustPost(`mutation { signUp(name: "ada") { token account { id } } }`, &su)
	a := signedUpAccount{token: su.SignUp.Token, id: su.SignUp.Account.ID, auth: bearerOpt(su.SignUp.Token)}
	var ep struct{ CreateEndpoint struct{ ID string } }
	e.c.MustPost(`mutation { createEndpoint(input: `+input+`) { id } }`, &ep, a.auth)
	a.endpoint = ep.CreateEndpoint.ID
	return a
}

func (e *env) tokens(t *testing.T, tok string) []tokenRow {
	t.Helper()
	var out struct{ Tokens []tokenRow }
	e.c.MustPost(`{ tokens { id name createdAt lastUsedAt expiresAt current } }`, &out, bearerOpt(tok))
	return out.Tokens
}

// TestTokensPerDevice: an account's tokens are listed by name with the one
// in use marked, a new one works at once, a revoked one stops at once, and
// another account's token ids read exactly like unknown ones.
func TestTokensPerDevice(t *testing.T) {
	e := newEnv(t)
	first := e.signUp(t, "ada")
	other := e.signUp(t, "bob")

	list := e.tokens(t, first)
	if len(list) != 1 || list[0].Name != "first token" || !list[0].Current || list[0].ExpiresAt != nil {
		t.Fatalf("after sign-up: %+v", list)
	}
	var created struct {
		CreateToken struct {
			Token  tokenRow
			Secret string
		}
	}
	e.c.MustPost(`mutation { createToken(name: "laptop", expiresIn: "30d") { token { id name expiresAt current } secret } }`, &created, bearerOpt(first))
	laptop, secret := created.CreateToken.Token, created.CreateToken.Secret
	var expires time.Time
	if laptop.ExpiresAt != nil {
		expires, _ = time.Parse(time.RFC3339Nano, *laptop.ExpiresAt)
	}
	if !strings.HasPrefix(secret, "rly_") || laptop.Name != "laptop" || laptop.Current || expires.Before(time.Now().Add(29*24*time.Hour)) {
		t.Fatalf("created %+v (secret %d chars)", laptop, len(secret))
	}
	list = e.tokens(t, secret)
	if len(list) != 2 || list[0].Current || !list[1].Current || list[1].ID != laptop.ID {
		t.Fatalf("listed with the new token: %+v", list)
	}
	if list[0].LastUsedAt == nil {
		t.Errorf("the first token's use was not recorded: %+v", list[0])
	}

	// bob's view of ada's token id is the view of an id that does not exist.
	var errOther, errUnknown error
	errOther = e.c.Post(`mutation($id: ID!) { revokeToken(id: $id) }`, &struct{ RevokeToken bool }{}, client.Var("id", laptop.ID), bearerOpt(other))
	errUnknown = e.c.Post(`mutation($id: ID!) { revokeToken(id: $id) }`, &struct{ RevokeToken bool }{}, client.Var("id", "0190aaaa-0000-7000-8000-000000000000"), bearerOpt(other))
	if code(errOther) != "NOT_FOUND" || code(errUnknown) != "NOT_FOUND" || scrubID(errOther, laptop.ID) != scrubID(errUnknown, "0190aaaa-0000-7000-8000-000000000000") {
		t.Fatalf("another account's token: %v; unknown token: %v", errOther, errUnknown)
	}
	if got := e.tokens(t, secret); len(got) != 2 {
		t.Fatalf("bob's attempt changed ada's tokens: %+v", got)
	}

	e.c.MustPost(`mutation($id: ID!) { revokeToken(id: $id) }`, &struct{ RevokeToken bool }{}, client.Var("id", laptop.ID), bearerOpt(first))
	if err := e.c.Post(`{ tokens { id } }`, &struct{}{}, bearerOpt(secret)); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("revoked token: %v, want UNAUTHENTICATED", err)
	}
	if list := e.tokens(t, first); len(list) != 1 || list[0].Name != "first token" {
		t.Fatalf("after the revocation: %+v", list)
	}
	// Revoking twice is no error and changes nothing.
	e.c.MustPost(`mutation($id: ID!) { revokeToken(id: $id) }`, &struct{ RevokeToken bool }{}, client.Var("id", laptop.ID), bearerOpt(first))
}

// scrubID is an error's text without the id it was asked about.
func scrubID(err error, id string) string {
	if err == nil {
		return ""
	}
	return strings.ReplaceAll(err.Error(), id, "ID")
}

func TestCreateTokenRefusals(t *testing.T) {
	e := newEnv(t)
	tok := e.signUp(t, "ada")
	for _, tc := range []struct {
		name, query, field string
		opts               []client.Option
		want               string
	}{
		{"no token", `mutation { createToken(name: "x") { secret } }`, "", nil, "UNAUTHENTICATED"},
		{"blank name", `mutation { createToken(name: " ") { secret } }`, "name", []client.Option{bearerOpt(tok)}, "INVALID_INPUT"},
		{"long name", `mutation { createToken(name: "` + strings.Repeat("x", 101) + `") { secret } }`, "name", []client.Option{bearerOpt(tok)}, "INVALID_INPUT"},
		{"bad lifetime", `mutation { createToken(name: "x", expiresIn: "soon") { secret } }`, "expiresIn", []client.Option{bearerOpt(tok)}, "INVALID_INPUT"},
		{"too short", `mutation { createToken(name: "x", expiresIn: "10s") { secret } }`, "expiresIn", []client.Option{bearerOpt(tok)}, "INVALID_INPUT"},
		{"revoke without token", `mutation { revokeToken(id: "x") }`, "", nil, "UNAUTHENTICATED"},
		{"list without token", `{ tokens { id } }`, "", nil, "UNAUTHENTICATED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.c.Post(tc.query, &struct{}{}, tc.opts...)
			if got := code(err); got != tc.want {
				t.Fatalf("code %q, want %q (%v)", got, tc.want, err)
			}
			if tc.field != "" && !strings.Contains(err.Error(), `"field":"`+tc.field+`"`) {
				t.Fatalf("error does not name %s: %v", tc.field, err)
			}
		})
	}
}

// TestRevokedTokenClosesItsSockets: a socket opened with a token is closed
// with 4403 "token revoked" as soon as the token is revoked.
func TestRevokedTokenClosesItsSockets(t *testing.T) {
	e := newEnv(t)
	first := e.signUp(t, "ada")
	var created struct{ CreateToken struct{ Secret string } }
	e.c.MustPost(`mutation { createToken(name: "agent") { secret } }`, &created, bearerOpt(first))
	secret := created.CreateToken.Secret
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	open := func(tok string) *websocket.Conn {
		c, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + tok}}); err != nil {
			t.Fatal(err)
		}
		var ack struct{ Type string }
		if err := c.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
			t.Fatalf("connection_init: %v %+v", err, ack)
		}
		return c
	}
	revokedSock, keptSock := open(secret), open(first)
	closed := make(chan error, 2)
	for _, c := range []*websocket.Conn{revokedSock, keptSock} {
		go func() {
			for {
				var m struct{ Type string }
				if err := c.ReadJSON(&m); err != nil {
					closed <- err
					return
				}
				if m.Type == "ping" {
					_ = c.WriteJSON(map[string]string{"type": "pong"})
				}
			}
		}()
	}
	var list struct{ Tokens []tokenRow }
	e.c.MustPost(`{ tokens { id name } }`, &list, bearerOpt(first))
	var agentID string
	for _, tk := range list.Tokens {
		if tk.Name == "agent" {
			agentID = tk.ID
		}
	}
	e.c.MustPost(`mutation($id: ID!) { revokeToken(id: $id) }`, &struct{ RevokeToken bool }{}, client.Var("id", agentID), bearerOpt(first))
	select {
	case err := <-closed:
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4403 || ce.Text != "token revoked" {
			t.Fatalf("socket ended with %v, want 4403 token revoked", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked token's socket is still open")
	}
	// The other token's socket stays: it answers a ping of its own.
	if err := keptSock.WriteJSON(map[string]string{"type": "ping"}); err != nil {
		t.Fatalf("the other socket: %v", err)
	}
	select {
	case err := <-closed:
		t.Fatalf("the other token's socket closed too: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestExpiredTokenIsRefused: a token past its expiry is UNAUTHENTICATED,
// like an unknown one, while the account's other tokens keep working.
func TestExpiredTokenIsRefused(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	e := newEnvClock(t, func() time.Time { return time.Unix(0, clock.Load()) })
	first := e.signUp(t, "ada")
	var created struct{ CreateToken struct{ Secret string } }
	e.c.MustPost(`mutation { createToken(name: "short", expiresIn: "1m") { secret } }`, &created, bearerOpt(first))
	short := created.CreateToken.Secret
	if err := e.c.Post(`{ tokens { id } }`, &struct{ Tokens []struct{ ID string } }{}, bearerOpt(short)); err != nil {
		t.Fatalf("before its expiry: %v", err)
	}
	clock.Add(int64(time.Minute))
	if err := e.c.Post(`{ tokens { id } }`, &struct{}{}, bearerOpt(short)); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("at its expiry: %v, want UNAUTHENTICATED", err)
	}
	if list := e.tokens(t, first); len(list) != 2 || list[1].ExpiresAt == nil || *list[1].ExpiresAt != "2026-11-01T09:01:00Z" {
		t.Fatalf("the expired token is not listed with its expiry: %+v", list)
	}
}

// TestRefusedTokensAreLimited: a client sending refused tokens (revoked,
// unknown) is told RATE_LIMITED after FailedAuthRate's burst, while a
// valid token keeps working.
func TestRefusedTokensAreLimited(t *testing.T) {
	e := newEnv(t)
	good := e.signUp(t, "ada")
	limited := 0
	for i := 0; i < 40; i++ {
		err := e.c.Post(`{ tokens { id } }`, &struct{}{}, bearerOpt("rly_revokedorunknown"))
		switch extCode(err) {
		case "UNAUTHENTICATED":
			if limited > 0 {
				t.Fatalf("attempt %d was let through after being limited", i)
			}
		case "RATE_LIMITED":
			if i < 30 {
				t.Fatalf("limited after %d refused tokens, want 30 let through", i)
			}
			limited++
		default:
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if limited == 0 {
		t.Fatal("40 refused tokens in a row were never limited")
	}
	if list := e.tokens(t, good); len(list) != 1 {
		t.Fatalf("a valid token after the limit: %+v", list)
	}
}

// TestAdminTokenIsNotARefusedToken: the operator's admin token is valid
// and acts for no account. A field that needs an account refuses it
// FORBIDDEN, saying so, me is null for it and its own fields answer, and
// none of that spends one of its client address's refused tokens
// (FailedAuthRate): after more admin requests than that burst, a wrong
// token from the same address is still let through the whole burst before
// RATE_LIMITED, and a member's token works.
func TestAdminTokenIsNotARefusedToken(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	member, admin, wrong := newBrowser(t, srv), newBrowser(t, srv), newBrowser(t, srv)
	member.tok, admin.tok, wrong.tok = e.signUp(t, "ada"), adminToken, "rly_revokedorunknown"

	burst := graph.FailedAuthRate.Burst
	tests := []struct {
		name, query string
		code        string // of the first error; "" when it answers
		data        string // when it answers
	}{
		{"relay whoami's query", `{ me { id } tokens { id } }`, "FORBIDDEN", ""},
		{"me", `{ me { id } }`, "", `{"me":null}`},
		{"an account's list", `{ endpoints { id } }`, "FORBIDDEN", ""},
		{"an account's mutation", `mutation { createToken(name: "ops") { secret } }`, "FORBIDDEN", ""},
		{"the operator's invite", `mutation { createInvite { code } }`, "", ""},
		{"the log", `{ events(first: 1) { nodes { id } } }`, "", ""},
	}
	for _, tt := range tests {
		seen := map[string]int{}
		for range burst + 1 {
			a := admin.do(tt.query, nil, nil)
			seen[a.code()]++
			switch {
			case a.code() != tt.code:
			case tt.code == "FORBIDDEN" && !strings.Contains(a.Errors[0].Message, "the admin token acts for no account"):
				t.Errorf("%s: refused %q, want it to say the admin token acts for no account", tt.name, a.Errors[0].Message)
			case tt.data != "" && string(a.Data) != tt.data:
				t.Errorf("%s: answered %s, want %s", tt.name, a.Data, tt.data)
			}
		}
		if seen[tt.code] != burst+1 {
			t.Errorf("%s with the admin token %d times: codes %v, want %q each time", tt.name, burst+1, seen, tt.code)
		}
	}

	var me struct{ Me struct{ Name string } }
	if a := member.do(`{ me { name } }`, nil, &me); len(a.Errors) > 0 || me.Me.Name != "ada" {
		t.Fatalf("a member's token after the admin's requests: %+v %s", a.Errors, a.Data)
	}
	// The bound is kept: a wrong token is limited after the burst.
	let := 0
	for ; let <= burst+10; let++ {
		a := wrong.do(`{ tokens { id } }`, nil, nil)
		if a.code() == "RATE_LIMITED" {
			break
		}
		if a.code() != "UNAUTHENTICATED" {
			t.Fatalf("wrong token %d: %+v", let+1, a.Errors)
		}
	}
	if let < burst || let > burst+10 {
		t.Fatalf("after %d admin requests a wrong token was let through %d times before RATE_LIMITED, want %d: the admin token spent %d",
			len(tests)*(burst+1), let, burst, burst-let)
	}
}

// TestTokenChangesAreRatedPerAccount: every token made or revoked is an
// event of the account's stream, so createToken and revokeToken take from
// one bucket per account (Resolver.TokenRate): past it RATE_LIMITED with
// retryAfterSeconds and nothing appended, while another account still
// makes tokens.
func TestTokenChangesAreRatedPerAccount(t *testing.T) {
	const burst = 4
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		// A rate that refills nothing while the test runs.
		r.TokenRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: burst}
	})
	signUp := func(name string) client.Option {
		t.Helper()
		var su struct{ SignUp struct{ Token string } }
		e.c.MustPost(`mutation($n: String!) { signUp(name: $n) { token } }`, &su, client.Var("n", name))
		return client.AddHeader("Authorization", "Bearer "+su.SignUp.Token)
	}
	// call runs a mutation and returns its error's code and
	// retryAfterSeconds ("" when it succeeded), and the token it made.
	call := func(auth client.Option, q string, vars ...client.Option) (code string, retry float64, id string) {
		t.Helper()
		resp, err := e.c.RawPost(q, append(vars, auth)...)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Errors) > 0 {
			var errs []struct{ Extensions map[string]any }
			if err := json.Unmarshal(resp.Errors, &errs); err != nil {
				t.Fatal(err)
			}
			code, _ = errs[0].Extensions["code"].(string)
			retry, _ = errs[0].Extensions["retryAfterSeconds"].(float64)
			return code, retry, ""
		}
		var data struct {
			CreateToken struct{ Token struct{ ID string } }
		}
		raw, err := json.Marshal(resp.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &data); err != nil {
			t.Fatal(err)
		}
		return "", 0, data.CreateToken.Token.ID
	}
	const create = `mutation { createToken(name: "loop") { token { id } } }`
	const revoke = `mutation($id: ID!) { revokeToken(id: $id) }`
	a := signUp("loop")
	accountEvents := func() int {
		t.Helper()
		n := 0
		for after := uint64(0); ; {
			batch, err := e.store.ReadAll(t.Context(), after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(batch) == 0 {
				return n
			}
			for _, ev := range batch {
				if kind, _, _ := domain.ParseStream(ev.Stream); kind == domain.StreamAccount {
					n++
				}
			}
			after = batch[len(batch)-1].Position
		}
	}
	before := accountEvents()
	made, refused := 0, 0
	for i := range 3 * burst {
		code, retry, id := call(a, create)
		if code == "" {
			made++
			code, retry, _ = call(a, revoke, client.Var("id", id))
		}
		if code != "" {
			if code != "RATE_LIMITED" || retry <= 0 {
				t.Fatalf("call %d: %s (retry after %v s), want RATE_LIMITED with retryAfterSeconds", i, code, retry)
			}
			refused++
		}
	}
	// Each token made is one event and each revoked one; the calls
	// refused appended nothing (the first use of the token is on its own
	// stream, apart).
	if made != burst/2 || refused != 3*burst-made {
		t.Errorf("of %d createToken calls (each followed by its revokeToken) %d made a token, %d calls refused; want %d made", 3*burst, made, refused, burst/2)
	}
	if n := accountEvents() - before; n != burst {
		t.Errorf("the account's stream gained %d events, want %d", n, burst)
	}
	b := signUp("other")
	if code, _, _ := call(b, create); code != "" {
		t.Errorf("another account's createToken: %s", code)
	}
}
