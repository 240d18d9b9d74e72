package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/clientconfig"
)

// firstLogin logs in a command that found no token (relay listen), so the
// first webhook needs no separate `relay login`: --signup NAME creates an
// account; on a terminal it offers to sign up (a relay on this machine
// that allows it) or to log in through the browser (the device flow);
// elsewhere it says how. The token is stored as `relay login` stores it,
// unless a login for another relay is stored: that one is kept, and this
// token serves this run only.
func firstLogin(ctx context.Context, conn *connection, signup string, env func(string) string, stdin io.Reader, stderr io.Writer) (*apiclient.Client, error) {
	stored, path, err := clientconfig.Load()
	if err != nil {
		return nil, err
	}
	anon := conn.client("")
	var token string
	switch {
	case signup != "":
		if token, _, err = signUp(ctx, anon, signup, ""); err != nil {
			return nil, fmt.Errorf("sign up at %s: %w", conn.server, err)
		}
	case canAsk(stdin):
		name := strings.TrimSpace(env("USER"))
		if name == "" {
			name = "me"
		}
		switch {
		case localServer(conn.server) && signupOpen(ctx, anon) &&
			ask(stdin, stderr, fmt.Sprintf("No login for %s. Sign up a new account there, named %q?", conn.server, name)):
			if token, _, err = signUp(ctx, anon, name, ""); err != nil {
				return nil, fmt.Errorf("sign up at %s: %w", conn.server, err)
			}
		case ask(stdin, stderr, fmt.Sprintf("No login for %s. Log in through the browser?", conn.server)):
			if token, err = deviceLogin(ctx, anon, conn.server, stderr); err != nil {
				return nil, fmt.Errorf("log in to %s: %w", conn.server, err)
			}
		default:
			return nil, errNotLoggedIn
		}
	default:
		return nil, usage(fmt.Errorf("not logged in to %s: run `relay login --server %s` (approve in the browser), "+
			"or add --signup NAME to create an account on a relay that allows sign-up (or pass --token, or set RELAY_TOKEN)", conn.server, conn.server))
	}
	_, me, err := checkToken(ctx, conn.client(token))
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", conn.server, err)
	}
	conn.token = token
	if stored.Token != "" && !clientconfig.SameServer(stored.Server, conn.server) {
		fmt.Fprintf(stderr, "logged in to %s as %s (%s) for this run only: the login to %s stays stored (relay login --server %s stores this one)\n",
			conn.server, me.Name, me.ID, stored.Server, conn.server)
		return conn.client(token), nil
	}
	if err := clientconfig.Save(path, clientconfig.Config{Server: conn.server, Token: token}); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "logged in to %s as %s (%s); token stored in %s\n", conn.server, me.Name, me.ID, path)
	return conn.client(token), nil
}

// signupOpen reports whether anyone may sign up at the relay.
func signupOpen(ctx context.Context, anon *apiclient.Client) bool {
	var res struct{ SignupMode string }
	return anon.Do(ctx, `{ signupMode }`, nil, &res) == nil && res.SignupMode == "OPEN"
}

// localServer reports whether the relay runs on this machine, where
// signing up is what a developer trying it out means.
func localServer(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || (ip != nil && ip.IsLoopback())
}

// notLoggedIn reports whether err is the refusal of a command that has
// no token.
func notLoggedIn(err error) bool { return errors.Is(err, errNotLoggedIn) }
