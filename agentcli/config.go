package agentcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/relayhq/relay/domain/duration"
)

// CommandLine is the agent's flags, shared by Run and the relay command's
// `relay agent`: register them with AddFlags, then build Options. The
// relay command has its own --server and --token (with the stored login).
type CommandLine struct {
	Endpoints []string // ID or ID=TARGET, repeatable
	Target    string   // the target of Endpoints given without one
	Timeout   time.Duration
	Insecure  bool
	// HostHeader and CAFile: see Options. AddFlags leaves --ca-file to
	// the caller, whose other calls to the relay need it too.
	HostHeader string
	CAFile     string
	// PlainGraphQL: see Options.
	PlainGraphQL bool
}

// CAFileUsage is the help of --ca-file.
const CAFileUsage = "PEM certificates trusted for an https relay besides the system's, e.g. a private CA (env RELAY_CA_FILE; SSL_CERT_FILE replaces the system's)"

// TokenFlagWarning is printed when the token is given as a flag: the
// command line of a process is readable by every user of the machine
// (ps, /proc/<pid>/cmdline), the environment is not.
const TokenFlagWarning = "relay agent: warning: --token shows the token to every local user in the process list; set RELAY_TOKEN instead"

// AddFlags registers the agent's flags on fs, except --server and --token.
func (c *CommandLine) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&c.Endpoints, "endpoint", nil, "Endpoint to serve, ID or ID=TARGET; repeat for several over one connection (env RELAY_ENDPOINT)")
	fs.StringVar(&c.Target, "target", "", "local target of Endpoints given without one: PORT, localhost:PORT or http(s)://localhost:PORT/prefix; default the Endpoint's stored target (env RELAY_TARGET)")
	fs.Var(duration.NewFlag(&c.Timeout, 30*time.Second), "timeout", "how long a local request may take")
	fs.BoolVar(&c.Insecure, "insecure", false, "accept any certificate of an https target (a self-signed local one)")
	fs.StringVar(&c.HostHeader, "host-header", HostRewrite, "Host of the local request: rewrite (the target's) or preserve (the public host the sender called) (env RELAY_HOST_HEADER)")
	fs.BoolVar(&c.PlainGraphQL, "plain-graphql", false, "receive forwards and send answers as GraphQL messages, as third-party agents do, instead of the relay's binary frames")
}

// Options validates the command line and returns Serve's options for
// server and token (without an Observer).
func (c *CommandLine) Options(server, token string) (Options, error) {
	var missing []string
	for _, f := range []struct{ name, value string }{{"--server", server}, {"--token", token}} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(c.Endpoints) == 0 {
		missing = append(missing, "--endpoint")
	}
	if len(missing) > 0 {
		return Options{}, &OptionsError{err: fmt.Errorf("agent: missing %s (flags, RELAY_SERVER, RELAY_TOKEN, RELAY_ENDPOINT, or relay login)", strings.Join(missing, ", "))}
	}
	if c.Target != "" {
		if _, err := ParseTarget(c.Target); err != nil {
			return Options{}, &OptionsError{err: fmt.Errorf("agent: --target: %w", err)}
		}
	}
	if c.Timeout <= 0 {
		return Options{}, &OptionsError{err: errors.New("agent: --timeout must be positive")}
	}
	o := Options{Server: server, Token: token, Timeout: c.Timeout, Insecure: c.Insecure, HostHeader: c.HostHeader, CAFile: c.CAFile,
		PlainGraphQL: c.PlainGraphQL}
	for _, e := range c.Endpoints {
		for _, one := range strings.Split(e, ",") {
			r, err := ParseRoute(one)
			if err != nil {
				return Options{}, &OptionsError{err: fmt.Errorf("agent: --endpoint: %w", err)}
			}
			if r.Target == "" {
				r.Target = c.Target
			}
			o.Endpoints = append(o.Endpoints, r)
		}
	}
	if _, _, err := o.validate(); err != nil {
		return Options{}, &OptionsError{err: fmt.Errorf("agent: %w", err)}
	}
	if _, err := TLSConfig(o.CAFile); err != nil {
		return Options{}, &OptionsError{err: fmt.Errorf("agent: %w", err)}
	}
	return o, nil
}

// Run is the agent as a program of its own: it parses args (flags, with
// RELAY_SERVER, RELAY_TOKEN, RELAY_ENDPOINT, RELAY_TARGET from the
// environment for those not given), serves until ctx ends, and prints
// the state on stderr and one line per forward on stdout.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr, os.LookupEnv)
	if err != nil {
		return err
	}
	o.Observer = &TextObserver{Out: stdout, Status: stderr}
	return Serve(ctx, o)
}

func parseArgs(args []string, stderr io.Writer, env func(string) (string, bool)) (Options, error) {
	fs := pflag.NewFlagSet("relay agent", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var c CommandLine
	var server, token string
	fs.StringVar(&server, "server", "", "relay URL, e.g. http://localhost:8080 (env RELAY_SERVER)")
	fs.StringVar(&token, "token", "", "API token of the Endpoints' account (env RELAY_TOKEN); a flag shows in the process list")
	c.AddFlags(fs)
	fs.StringVar(&c.CAFile, "ca-file", "", CAFileUsage)
	if err := fs.Parse(args); err != nil {
		return Options{}, fmt.Errorf("agent: %w", err)
	}
	if fs.NArg() > 0 {
		return Options{}, &OptionsError{err: fmt.Errorf("agent: unexpected arguments %q", fs.Args())}
	}
	if fs.Changed("token") {
		fmt.Fprintln(stderr, TokenFlagWarning)
	}
	for _, name := range []string{"server", "token", "endpoint", "target", "host-header", "ca-file"} {
		if v, ok := env("RELAY_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok && v != "" && !fs.Changed(name) {
			if err := fs.Set(name, v); err != nil {
				return Options{}, &OptionsError{err: fmt.Errorf("agent: RELAY_%s: %w", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), err)}
			}
		}
	}
	return c.Options(server, token)
}
