package agentcli

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
)

// config is the agent's validated command line.
type config struct {
	server   string // as given, for messages
	wsURL    string // ws(s)://host/graphql
	token    string
	endpoint string
	target   string
	timeout  time.Duration
	// hostHeader is --host-header (hostRewrite or hostPreserve); tls is
	// nil for the system's roots, else they plus --ca-file's.
	hostHeader string
	tls        *tls.Config
}

// tokenFlagWarning is printed when the token is given as a flag: the
// command line of a process is readable by every user of the machine
// (ps, /proc/<pid>/cmdline), the environment is not.
const tokenFlagWarning = "relay agent: warning: --token shows the token to every local user in the process list; set RELAY_TOKEN instead"

// parseConfig reads flags, falling back to RELAY_* environment variables
// looked up with env.
func parseConfig(args []string, stderr io.Writer, env func(string) (string, bool)) (config, error) {
	getenv := func(k string) string { v, _ := env(k); return v }
	fs := flag.NewFlagSet("relay agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", getenv("RELAY_SERVER"), "relay URL, e.g. http://localhost:8080 (env RELAY_SERVER)")
	token := fs.String("token", getenv("RELAY_TOKEN"), "API token of the Endpoint's account; prefer env RELAY_TOKEN: a flag shows in the process list to every local user")
	endpoint := fs.String("endpoint", getenv("RELAY_ENDPOINT"), "ID of the Endpoint to serve (env RELAY_ENDPOINT)")
	target := fs.String("target", getenv("RELAY_TARGET"), "local target, 127.0.0.1:PORT or localhost:PORT (env RELAY_TARGET)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long a local request may take")
	hostHeader := fs.String("host-header", orDefault(getenv("RELAY_HOST_HEADER"), hostRewrite),
		"Host of the local request: rewrite (the target's) or preserve (the public host the sender called) (env RELAY_HOST_HEADER)")
	caFile := fs.String("ca-file", orDefault(getenv("RELAY_CA_FILE"), getenv("SSL_CERT_FILE")),
		"PEM certificates trusted for an https relay besides the system's, e.g. a private CA (env RELAY_CA_FILE or SSL_CERT_FILE)")
	if err := fs.Parse(args); err != nil {
		return config{}, fmt.Errorf("agent: %w", err)
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("agent: unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "token" {
			fmt.Fprintln(stderr, tokenFlagWarning)
		}
	})
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"--server", *server}, {"--token", *token}, {"--endpoint", *endpoint}, {"--target", *target},
	} {
		if strings.TrimSpace(f.value) == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return config{}, fmt.Errorf("agent: missing %s (flags or RELAY_SERVER, RELAY_TOKEN, RELAY_ENDPOINT, RELAY_TARGET)", strings.Join(missing, ", "))
	}
	ws, err := websocketURL(*server)
	if err != nil {
		return config{}, fmt.Errorf("agent: --server: %w", err)
	}
	if err := domain.ValidateAddressID(*endpoint); err != nil {
		return config{}, fmt.Errorf("agent: --endpoint: %w", err)
	}
	if err := domain.ValidateTarget(*target); err != nil {
		return config{}, fmt.Errorf("agent: --target %q: %w", *target, err)
	}
	if *timeout <= 0 {
		return config{}, errors.New("agent: --timeout must be positive")
	}
	if *hostHeader != hostRewrite && *hostHeader != hostPreserve {
		return config{}, fmt.Errorf("agent: --host-header %q: rewrite or preserve", *hostHeader)
	}
	tlsConfig, err := clientTLS(*caFile)
	if err != nil {
		return config{}, fmt.Errorf("agent: %w", err)
	}
	return config{server: *server, wsURL: ws, token: *token, endpoint: *endpoint, target: *target, timeout: *timeout,
		hostHeader: *hostHeader, tls: tlsConfig}, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// websocketURL turns the relay's URL into its GraphQL WebSocket URL.
func websocketURL(server string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(server))
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	case "ws", "wss":
	default:
		return "", fmt.Errorf("%q: scheme must be http, https, ws or wss", server)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", server)
	}
	if !strings.HasSuffix(u.Path, "/graphql") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
		u.RawPath = ""
	}
	u.Fragment = ""
	return u.String(), nil
}
