package main

import (
	"context"
	"crypto/tls"
	"errors"

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
