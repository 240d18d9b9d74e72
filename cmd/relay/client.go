package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/clientconfig"
)

const defaultServer = "http://localhost:8080"

// errNotLoggedIn is returned when a command needs a token and none was
// given by flag, environment or `relay login`.
var errNotLoggedIn = usage(errors.New("no token: run `relay login` (or pass --token, or set RELAY_TOKEN)"))

// connection is the --server and --token of a client command.
type connection struct {
	server, token string
	tokenFlag     bool // the token was given on the command line
	caFile        string
	tls           *tls.Config // from caFile; nil: the system's roots
}

func (c *connection) flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.server, "server", defaultServer, "the relay's URL (else RELAY_SERVER, else the one stored by relay login)")
	fs.StringVar(&c.token, "token", "", "API token (else RELAY_TOKEN, else the one stored by relay login for this server)")
	fs.StringVar(&c.caFile, "ca-file", "", agentcli.CAFileUsage)
}

// loadTLS reads --ca-file (after the environment was bound).
func (c *connection) loadTLS() (err error) {
	if c.tls, err = apiclient.TLSConfig(c.caFile); err != nil {
		return usage(err)
	}
	return nil
}

// client calls the relay with token ("" for no account).
func (c *connection) client(token string) *apiclient.Client {
	return &apiclient.Client{Server: c.server, Token: token, TLS: c.tls}
}

// resolve fills what flags and environment left unset from the stored
// config: flag > env > config file > default. The stored token is used
// only with the stored server.
func (c *connection) resolve(fs *pflag.FlagSet, env func(string) string) error {
	c.tokenFlag = fs.Changed("token")
	if err := bindEnv(fs, env); err != nil {
		return usage(err)
	}
	if err := c.loadTLS(); err != nil {
		return err
	}
	var err error
	if c.server, err = normalServer(c.server); err != nil {
		return err
	}
	if fs.Changed("server") && fs.Changed("token") {
		return nil
	}
	stored, _, err := clientconfig.Load()
	if err != nil {
		return err
	}
	if !fs.Changed("server") && stored.Server != "" {
		c.server = stored.Server
	}
	if !fs.Changed("token") && stored.Token != "" && clientconfig.SameServer(c.server, stored.Server) {
		c.token = stored.Token
	}
	return nil
}

// start opens every client command that needs a token: it checks -o,
// then resolves the server and token.
func (c *connection) start(cmd *cobra.Command, env func(string) string, out output) (*apiclient.Client, error) {
	if err := out.check(); err != nil {
		return nil, err
	}
	return c.loggedIn(cmd.Flags(), env)
}

// loggedIn is resolve for commands that need a token.
func (c *connection) loggedIn(fs *pflag.FlagSet, env func(string) string) (*apiclient.Client, error) {
	if err := c.resolve(fs, env); err != nil {
		return nil, err
	}
	if c.token == "" {
		return nil, errNotLoggedIn
	}
	return c.client(c.token), nil
}

// callGraphQL posts one GraphQL operation to the relay at server.
func callGraphQL(ctx context.Context, server, token, query string, vars map[string]any, out any) error {
	return apiclient.New(server, token).Do(ctx, query, vars, out)
}

// normalServer reads --server: a URL, or a host[:port] without a scheme,
// which means http for this machine (localhost, *.localhost, 127.0.0.1,
// ::1) and https elsewhere, as a browser's address bar would.
func normalServer(s string) (string, error) {
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
		return "", usage(fmt.Errorf("--server %q is not a relay URL: give one such as http://localhost:8080 or https://relay.example.com", s))
	}
	return s, nil
}
