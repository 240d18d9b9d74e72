package cmdutil

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/clientconfig"
)

const DefaultServer = "http://localhost:8080"

// ErrNotLoggedIn is returned when a command needs a token and none was
// given by flag, environment or `relay login`.
var ErrNotLoggedIn = Usage(errors.New("no token: run `relay login` (or pass --token, or set RELAY_TOKEN)"))

// Connection is the --server and --token of a client command.
type Connection struct {
	Server, Token string
	TokenFlag     bool // the token was given on the command line
	CAFile        string
	TLS           *tls.Config  // from CAFile; nil: the system's roots
	hc            *http.Client // Client's, for TLS
	// ServerFrom and TokenFrom say where Resolve found Server and Token
	// (relay whoami prints them): "--server"/"--token", "RELAY_SERVER"/
	// "RELAY_TOKEN", the path of the config file relay login wrote, or
	// (the server only) "default"; TokenFrom is "" when there is no token.
	ServerFrom, TokenFrom string
}

// Flags adds --server, --token and --ca-file to fs.
func (c *Connection) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Server, "server", DefaultServer, "the relay's URL (else RELAY_SERVER, else the one stored by relay login)")
	fs.StringVar(&c.Token, "token", "", "API token (else RELAY_TOKEN, else the one stored by relay login for this server)")
	fs.StringVar(&c.CAFile, "ca-file", "", agentcli.CAFileUsage)
}

// LoadTLS reads --ca-file (after the environment was bound).
func (c *Connection) LoadTLS() (err error) {
	if c.TLS, err = agentcli.TLSConfig(c.CAFile); err != nil {
		return Usage(err)
	}
	return nil
}

// Client calls the relay with token ("" for no account). What it reads
// of an answer is bounded as it arrives: its bytes, JSON objects and
// values, and what it weighs decoded (apiclient.Do).
func (c *Connection) Client(token string) *apiclient.Client {
	var hc *http.Client // apiclient's own, for http
	if c.TLS != nil {
		if c.hc == nil {
			t := http.DefaultTransport.(*http.Transport).Clone()
			t.TLSClientConfig = c.TLS
			c.hc = &http.Client{Timeout: 2 * time.Minute, Transport: t}
		}
		hc = c.hc
	}
	return &apiclient.Client{Server: c.Server, Token: token, TLS: c.TLS, HTTP: hc}
}

// Resolve fills what flags and environment left unset from the stored
// config: flag > env > config file > default. The stored token is used
// only with the stored server.
func (c *Connection) Resolve(fs *pflag.FlagSet, env func(string) string) error {
	c.TokenFlag = fs.Changed("token")
	serverFlag := fs.Changed("server")
	if err := BindEnv(fs, env); err != nil {
		return Usage(err)
	}
	switch {
	case serverFlag:
		c.ServerFrom = "--server"
	case fs.Changed("server"):
		c.ServerFrom = "RELAY_SERVER"
	default:
		c.ServerFrom = "default"
	}
	switch {
	case c.Token == "":
		c.TokenFrom = ""
	case c.TokenFlag:
		c.TokenFrom = "--token"
	default:
		c.TokenFrom = "RELAY_TOKEN"
	}
	if err := c.LoadTLS(); err != nil {
		return err
	}
	var err error
	if c.Server, err = NormalServer(c.Server); err != nil {
		return err
	}
	if fs.Changed("server") && fs.Changed("token") {
		return nil
	}
	stored, path, err := clientconfig.Load()
	if err != nil {
		return err
	}
	if !fs.Changed("server") && stored.Server != "" {
		c.Server, c.ServerFrom = stored.Server, path
	}
	if !fs.Changed("token") && stored.Token != "" && clientconfig.SameServer(c.Server, stored.Server) {
		c.Token, c.TokenFrom = stored.Token, path
	}
	return nil
}

// ServerHint is " --server URL" for a command line a command suggests
// ("see them with: relay deliveries list ID") when a later command without
// --server would reach another relay than this one (RELAY_SERVER's, else
// the stored login's, else the default), and "" when it reaches this one.
func (c *Connection) ServerHint(env func(string) string) string {
	later := env("RELAY_SERVER")
	if later == "" {
		stored, _, _ := clientconfig.Load()
		later = cmp.Or(stored.Server, DefaultServer)
	}
	if n, err := NormalServer(later); err == nil && clientconfig.SameServer(c.Server, n) {
		return ""
	}
	return " --server " + c.Server
}

// Start opens every client command that needs a token: it checks -o,
// then resolves the server and token.
func (c *Connection) Start(cmd *cobra.Command, env func(string) string, out Output) (*apiclient.Client, error) {
	if err := out.Check(); err != nil {
		return nil, err
	}
	return c.LoggedIn(cmd.Flags(), env)
}

// StartTokenOptional opens a client command that works without a token
// too (inspectors, the public address of a delivery): it checks -o, then
// resolves the server and the token if there is one.
func (c *Connection) StartTokenOptional(cmd *cobra.Command, env func(string) string, out Output) error {
	if err := out.Check(); err != nil {
		return err
	}
	return c.Resolve(cmd.Flags(), env)
}

// LoggedIn is Resolve for commands that need a token.
func (c *Connection) LoggedIn(fs *pflag.FlagSet, env func(string) string) (*apiclient.Client, error) {
	if err := c.Resolve(fs, env); err != nil {
		return nil, err
	}
	if c.Token == "" {
		return nil, ErrNotLoggedIn
	}
	return c.Client(c.Token), nil
}

// CallGraphQL posts one GraphQL operation to the relay at server.
func CallGraphQL(ctx context.Context, server, token, query string, vars map[string]any, out any) error {
	return apiclient.New(server, token).Do(ctx, query, vars, out)
}

// AdminRefused is err of a call made with the operator's --admin-token:
// a token the relay refuses there is that token, which relay login does
// not give, so the refusal names it instead of apiclient's advice to log
// in. Other errors pass through.
func AdminRefused(err error) error {
	var e *apiclient.Error
	if errors.As(err, &e) && e.Code == "UNAUTHENTICATED" && e.Server != "" {
		return Usage(fmt.Errorf("the relay at %s refused the admin token: give the --admin-token relay serve runs with (or set RELAY_ADMIN_TOKEN); a relay started without --admin-token takes none (UNAUTHENTICATED)", e.Server))
	}
	return err
}

// NormalServer reads --server: a URL, or a host[:port] without a scheme,
// which means http for this machine (localhost, *.localhost, 127.0.0.1,
// ::1) and https elsewhere, as a browser's address bar would. It is the
// relay's base URL: the API's URL as a GraphQL user pastes it
// (http://host:8080/graphql) names the same relay, so a trailing /graphql
// is dropped, and so is a trailing slash.
func NormalServer(s string) (string, error) {
	if s == "" {
		return s, nil
	}
	if !strings.Contains(s, "://") {
		host, _, _ := strings.Cut(s, "/")
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		scheme := "https://"
		if ip := net.ParseIP(host); host == "localhost" || strings.HasSuffix(host, ".localhost") || (ip != nil && ip.IsLoopback()) {
			scheme = "http://"
		}
		s = scheme + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", Usage(fmt.Errorf("--server %q is not a relay URL: give one such as http://localhost:8080 or https://relay.example.com", s))
	}
	return strings.TrimSuffix(strings.TrimSuffix(strings.TrimRight(s, "/"), "/graphql"), "/"), nil
}

// ConsolePage is a console page's URL: the whole URL the relay gave when
// its console has a host of its own, else path on the server's URL.
func ConsolePage(server, path string, whole *string) string {
	if whole != nil && *whole != "" {
		return *whole
	}
	return strings.TrimRight(server, "/") + path
}
