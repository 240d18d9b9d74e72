package login

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/clientconfig"
)

// FirstLogin logs in a command that found no token (relay listen), so the
// first webhook needs no separate `relay login`: --signup NAME creates an
// account; on a terminal it offers to sign up (a relay on this machine
// that allows it) or to log in through the browser (the device flow);
// elsewhere it says how. The token is stored as `relay login` stores it,
// unless a login for another relay is stored: that one is kept, and this
// token serves this run only.
func FirstLogin(ctx context.Context, conn *cmdutil.Connection, signup string, env func(string) string, stdin io.Reader, stderr io.Writer) (*apiclient.Client, error) {
	stored, path, err := clientconfig.Load()
	if err != nil {
		return nil, err
	}
	anon := conn.Client("")
	var token string
	switch {
	case signup != "":
		if token, _, err = signUp(ctx, anon, signup, ""); err != nil {
			return nil, fmt.Errorf("sign up at %s: %w", conn.Server, err)
		}
	case cmdutil.CanAsk(stdin):
		name := strings.TrimSpace(env("USER"))
		if name == "" {
			name = "me"
		}
		switch {
		case localServer(conn.Server) && signupOpen(ctx, anon) &&
			cmdutil.Ask(stdin, stderr, fmt.Sprintf("No login for %s. Sign up a new account there, named %q?", conn.Server, name)):
			if token, _, err = signUp(ctx, anon, name, ""); err != nil {
				return nil, fmt.Errorf("sign up at %s: %w", conn.Server, err)
			}
		case cmdutil.Ask(stdin, stderr, fmt.Sprintf("No login for %s. Log in through the browser?", conn.Server)):
			if token, err = deviceLogin(ctx, anon, conn.Server, stderr); err != nil {
				return nil, fmt.Errorf("log in to %s: %w", conn.Server, err)
			}
		default:
			return nil, cmdutil.ErrNotLoggedIn
		}
	default:
		return nil, cmdutil.Usage(fmt.Errorf("not logged in to %s: run `relay login --server %s` (approve in the browser), "+
			"or add --signup NAME to create an account on a relay that allows sign-up (or pass --token, or set RELAY_TOKEN)", conn.Server, conn.Server))
	}
	_, me, err := CheckToken(ctx, conn.Client(token))
	if err != nil {
		return nil, fmt.Errorf("login to %s: %w", conn.Server, err)
	}
	conn.Token = token
	if stored.Token != "" && !clientconfig.SameServer(stored.Server, conn.Server) {
		fmt.Fprintf(stderr, "logged in to %s as %s (%s) for this run only: the login to %s stays stored (relay login --server %s stores this one)\n",
			conn.Server, me.Name, me.ID, stored.Server, conn.Server)
		return conn.Client(token), nil
	}
	if err := clientconfig.Save(path, clientconfig.Config{Server: conn.Server, Token: token}); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "logged in to %s as %s (%s); token stored in %s\n", conn.Server, me.Name, me.ID, path)
	return conn.Client(token), nil
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

// NotLoggedIn reports whether err is the refusal of a command that has
// no token.
func NotLoggedIn(err error) bool { return errors.Is(err, cmdutil.ErrNotLoggedIn) }
