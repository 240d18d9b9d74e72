// Package listen is `relay listen`: the everyday command that gives a local
// server public URLs, logging in first when needed.
package listen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/agent"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/deliveries"
	"github.com/relayhq/relay/cli/endpoints"
	"github.com/relayhq/relay/cli/login"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/internal/signatures"
)

// Command is `relay listen`.
func Command(env func(string) string, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var printBody, printHeaders, insecure, catchUpFlag, primary, create bool
	var hostHeader, verify, verifySecretFile, events, signup string
	var filterTexts []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "listen TARGET [ENDPOINT...]",
		Short: "Give a local server a public webhook URL and forward to it",
		Long: `Forward webhooks to a server on this machine until interrupted.

TARGET is a port (3000), localhost:PORT, 127.0.0.1:PORT, or a URL:
http://localhost:3000/api puts /api in front of every recorded path, and
https://localhost:8443 talks TLS (--insecure for a self-signed certificate).

ENDPOINT names or ids select the Endpoints to serve, all over one
connection. With none, listen creates (the first time) or reuses an
Endpoint named after the current folder. A name no Endpoint has is
created with --create, or after asking on a terminal. Each is set to
PROXY mode with TARGET, unless other listeners already serve it and
--primary is not given: this one then receives copies and changes nothing
of the Endpoint (it sets its target if it becomes the primary later).
The public URL is printed first, then one line per request: time,
method, path, status, duration and the delivery id (for relay retry and
relay deliveries show).

Several listeners may serve one Endpoint (two developers, a laptop and a
CI job): one is the primary, whose answers go to the senders; the others
receive copies, whose answers are recorded but never sent. The primary is
the newest listener started with --primary, else the first connected; when
it leaves, the oldest one left takes over. listen prints which it is, and
when that changes; a request received as a copy says so on its line.

--filter forwards only the deliveries that match (repeat it: all must
match; a filter's values are alternatives):
  method=POST,PUT                      the method
  path=/webhooks/stripe, path=/hooks/* the path, exactly or by prefix
  header:X-GitHub-Event=push,pull_request
  json:type=charge.succeeded           a JSON body field (dotted: data.object.status)
  event=charge.succeeded               the provider's event type
--events A,B is short for --filter event=A,B (Stripe's type, GitHub's
X-GitHub-Event, Shopify's topic, Slack's event type). A delivery no
listener matches is recorded as filtered and answered as a LOG Endpoint.

With no login for the relay, listen logs in first: --signup NAME creates
an account (a relay that allows sign-up); on a terminal it offers to sign
up (a relay on this machine) or to log in through the browser. The token
is stored as relay login stores it.

Network trouble and relay restarts are retried with backoff; a refused
token, an unknown Endpoint or an invalid filter ends the command with exit
code 2.`,
		Example: `  relay listen 3000
  relay listen 3000 --signup me                      # first time, on a relay of your own
  relay listen 3000 --server https://relay.example.com   # logs in through the browser first
  relay listen http://localhost:3000/webhooks stripe github
  relay listen https://localhost:8443 --insecure --print-body
  relay listen 3000 --events charge.succeeded,invoice.paid
  relay listen 3000 --primary --filter 'header:X-GitHub-Event=push'`,
		Args: cmdutil.UsageArgs(cobra.MinimumNArgs(1)),
		// What ngrok (http), Stripe CLI and others call this command.
		SuggestFor: []string{"http", "forward", "tunnel", "expose"},
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			target, err := agentcli.ParseTarget(args[0])
			if err != nil {
				return cmdutil.Usage(fmt.Errorf("listen: %w%s", err, targetLater(args)))
			}
			check, err := signatureCheck(verify, verifySecretFile, env)
			if err != nil {
				return err
			}
			if timeout <= 0 {
				return cmdutil.Usage(errors.New("--timeout must be positive"))
			}
			filters, err := listenFilters(filterTexts, events)
			if err != nil {
				return cmdutil.Usage(err)
			}
			ctx := c.Context()
			warnIfNothingListens(ctx, target.Host, stderr)
			client, err := conn.LoggedIn(c.Flags(), env)
			if login.NotLoggedIn(err) {
				client, err = login.FirstLogin(ctx, &conn, signup, env, stdin, stderr)
			}
			if err != nil {
				return err
			}
			var eps []endpoints.Endpoint
			err = cmdutil.UntilReachable(ctx, stderr, func() (err error) {
				eps, err = listenEndpoints(ctx, client, args[1:], target.Host, primary, func(name string) bool {
					return create || cmdutil.Ask(stdin, stderr, fmt.Sprintf("No Endpoint is named %q. Create it, forwarding to %s?", name, args[0]))
				})
				return err
			})
			if ctx.Err() != nil {
				return nil // interrupted before it connected
			}
			if err != nil {
				return err
			}
			o := agentcli.Options{Server: conn.Server, Token: conn.Token, Timeout: timeout, Insecure: insecure, HostHeader: hostHeader, CAFile: conn.CAFile,
				Primary: primary, Filters: filters, Roles: true}
			for _, e := range eps {
				o.Endpoints = append(o.Endpoints, agentcli.Route{EndpointID: e.ID, Target: args[0]})
			}
			if out.JSON() {
				o.Observer = agent.NewJSONObserver(stdout, stderr)
			} else {
				o.Observer = &agentcli.TextObserver{Out: stdout, Status: stdout, Color: cmdutil.Colourful(stdout, env), PrintBody: printBody, PrintHeaders: printHeaders}
			}
			// Once connected: catch up what was refused while no agent was
			// (--catch-up), or say how much there is.
			o.Verify = check
			// The stored target follows the primary: a listener that
			// becomes it (the primary left) sets its own.
			o.Observer = newTargetKeeper(ctx, o.Observer, client, eps, target.Host, stderr)
			names := make([]string, 0, len(eps))
			for _, e := range eps {
				names = append(names, e.Name)
			}
			o.Observer = deliveries.NewCatchUpObserver(ctx, o.Observer, client, names, catchUpFlag, stderr)
			agent.SetRuntime(env)
			return agentcli.Serve(ctx, o)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return cmdutil.FlagError(c, fmt.Errorf("%w%s", err, targetFlagHint(err)))
	})
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	fs := cmd.Flags()
	fs.BoolVar(&printBody, "print-body", false, "print each request's body")
	fs.BoolVar(&printHeaders, "print-headers", false, "print each request's headers")
	fs.StringVar(&verify, "verify", "", "check each request's provider signature on this machine: "+strings.Join(signatures.Schemes(), ", ")+" (the secret from RELAY_VERIFY_SECRET or --verify-secret-file; it never reaches the relay)")
	fs.StringVar(&verifySecretFile, "verify-secret-file", "", "a file holding the --verify secret")
	fs.BoolVar(&catchUpFlag, "catch-up", false, "once connected, retry what was refused while no agent was connected (as relay retry --all --refused-offline)")
	fs.BoolVar(&insecure, "insecure", false, "accept any certificate of an https TARGET (a self-signed local one)")
	fs.Var(duration.NewFlag(&timeout, 30*time.Second), "timeout", "how long a local request may take")
	fs.StringVar(&signup, "signup", "", "with no login for the relay: create an account with this name first and store its token, as relay login --signup does")
	fs.BoolVar(&create, "create", false, "create the ENDPOINT names no Endpoint has (PROXY to TARGET) instead of asking")
	fs.BoolVar(&primary, "primary", false, "answer the senders: this listener becomes the primary (the newest --primary wins); the others receive copies")
	fs.StringArrayVar(&filterTexts, "filter", nil, "forward only deliveries that match (repeatable, all must match): method=POST, path=/hooks/*, header:NAME=A,B, json:PATH=A,B, event=A,B")
	fs.StringVar(&events, "events", "", "forward only these provider event types, comma-separated (short for --filter event=A,B)")
	fs.StringVar(&hostHeader, "host-header", agentcli.HostRewrite, "Host of the local request: rewrite (TARGET's) or preserve (the public host the sender called)")
	return cmd
}

// targetLater is the hint for a command line with the TARGET after an
// ENDPOINT (relay listen stripe 3000): "; TARGET comes first: relay listen
// 3000 stripe", or "" when no later argument is a target.
func targetLater(args []string) string {
	for i, a := range args[1:] {
		if _, err := agentcli.ParseTarget(a); err == nil {
			rest := append([]string{a}, args[:i+1]...)
			rest = append(rest, args[i+2:]...)
			return "; TARGET comes first: relay listen " + strings.Join(rest, " ")
		}
	}
	return ""
}

// targetFlags are the flags other webhook tools take the local server
// from (Stripe CLI's --forward-to, smee's --target and --port, ...);
// listen takes it as its first argument.
var targetFlags = []string{"--forward-to", "--forward", "--target", "--port", "--to", "-p", "-t"}

// targetFlagHint is the hint for an unknown flag that names the local
// server: "; the local server is listen's first argument: relay listen
// localhost:3000/webhooks", or "" for any other flag error.
func targetFlagHint(err error) string {
	msg := err.Error()
	switch msg {
	case "unknown flag: --path": // hookdeck's and smee's path flag
		return "; the path goes in TARGET: relay listen localhost:3000/webhooks"
	case "unknown flag: --skip-verify": // Stripe CLI's
		return "; a self-signed local certificate is accepted with --insecure"
	case "unknown flag: --url", "unknown flag: --domain", "unknown flag: --subdomain", "unknown flag: --name": // ngrok's, localtunnel's
		return "; a lasting public URL is an Endpoint's: name it after TARGET, relay listen 3000 my-app (relay endpoints list shows yours)"
	}
	for _, f := range targetFlags {
		named := msg == "unknown flag: "+f
		if short, ok := strings.CutPrefix(f, "-"); ok && !strings.HasPrefix(short, "-") {
			named = strings.HasPrefix(msg, "unknown shorthand flag: '"+short+"' in ")
		}
		if named {
			return "; the local server is listen's first argument, not a flag: relay listen 3000, relay listen localhost:3000/webhooks"
		}
	}
	return ""
}

// listenFilters parses --filter and --events (domain.ParseFilter); an
// invalid one is named in the error.
func listenFilters(texts []string, events string) ([]domain.Filter, error) {
	for _, t := range texts {
		if strings.TrimSpace(t) == "" {
			// What a script passes for "no filter": it is no --filter.
			return nil, fmt.Errorf("--filter %q is empty: to forward every delivery give no --filter (a listener has no filters but those given; an Endpoint's own are removed with relay endpoints update ENDPOINT --no-filters)", t)
		}
	}
	if events != "" {
		texts = append([]string{"event=" + events}, texts...)
	}
	fs, err := domain.ParseFilters(texts)
	if err != nil {
		if events != "" && strings.Contains(err.Error(), strconv.Quote("event="+events)) {
			return nil, fmt.Errorf("--events %q: %w", events, err)
		}
		return nil, fmt.Errorf("--filter: %w", err)
	}
	return fs, nil
}

// targetProbeTimeout bounds the one connection listen tries to its target
// as it starts.
const targetProbeTimeout = time.Second

// warnIfNothingListens tries one TCP connection to host and, when it is
// refused, says on w that deliveries will be answered 502 until something
// listens there. listen goes on either way: people start it before their
// app. A connection that neither opens nor is refused in time says nothing.
func warnIfNothingListens(ctx context.Context, host string, w io.Writer) {
	d := net.Dialer{Timeout: targetProbeTimeout}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err == nil {
		conn.Close()
		return
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintf(w, "nothing is listening on %s yet: deliveries will be answered 502 until it is\n", host)
	}
}

// createEndpoint makes an Endpoint named name in PROXY mode to host.
func createEndpoint(ctx context.Context, client *apiclient.Client, name, host string) (endpoints.Endpoint, error) {
	var res struct{ CreateEndpoint endpoints.Endpoint }
	in := map[string]any{"name": name, "mode": "PROXY", "target": host}
	if err := client.Do(ctx, `mutation($in: CreateEndpointInput!){ createEndpoint(input: $in){ `+endpoints.Fields+` } }`, map[string]any{"in": in}, &res); err != nil {
		return endpoints.Endpoint{}, fmt.Errorf("create endpoint %q: %w", name, err)
	}
	return res.CreateEndpoint, nil
}

// listenEndpoints finds (or, with no refs, creates) the Endpoints to serve
// (a name none has is created when create says so, else NOT_FOUND says how)
// and sets each to PROXY mode with the target host, except one that other
// listeners already serve when this one is not --primary: it will receive
// copies, and a copy listener changes nothing of the Endpoint (its mode
// and stored target belong to the primary or to the Endpoint's settings;
// a copy's target is its own session's).
func listenEndpoints(ctx context.Context, client *apiclient.Client, refs []string, host string, primary bool, create func(name string) bool) ([]endpoints.Endpoint, error) {
	all, err := endpoints.List(ctx, client)
	if err != nil {
		return nil, err
	}
	var chosen []endpoints.Endpoint
	if len(refs) == 0 {
		name := folderName()
		for _, e := range all {
			if e.Name == name {
				chosen = append(chosen, e)
				break
			}
		}
		if len(chosen) == 0 {
			e, err := createEndpoint(ctx, client, name, host)
			if err != nil {
				return nil, err
			}
			return []endpoints.Endpoint{e}, nil
		}
	}
	for _, ref := range refs {
		e, err := endpoints.Pick(all, ref)
		var apiErr *apiclient.Error
		if errors.As(err, &apiErr) && apiErr.Code == "NOT_FOUND" {
			if !create(ref) {
				return nil, &apiclient.Error{Code: "NOT_FOUND", Message: fmt.Sprintf(
					"no endpoint %q for this token%s; add --create to create it (or run relay endpoints create %s); relay endpoints list shows those there are", ref, endpoints.DidYouMean(all, ref), ref)}
			}
			if e, err = createEndpoint(ctx, client, ref, host); err != nil {
				return nil, err
			}
			all = append(all, e)
		}
		if err != nil {
			return nil, err
		}
		chosen = append(chosen, e)
	}
	for i, e := range chosen {
		if e.Mode == "PROXY" && e.Target != nil && *e.Target == host || e.Mode == "QUEUE" {
			continue // a QUEUE Endpoint's queue drains through listeners; it stays a queue
		}
		if e.AgentCount > 0 && !primary {
			continue // it will receive copies
		}
		var res struct{ UpdateEndpoint endpoints.Endpoint }
		in := map[string]any{"mode": "PROXY", "target": host}
		if err := client.Do(ctx, `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ `+endpoints.Fields+` } }`, map[string]any{"id": e.ID, "in": in}, &res); err != nil {
			return nil, fmt.Errorf("set endpoint %s to PROXY mode: %w", e.ID, err)
		}
		chosen[i] = res.UpdateEndpoint
	}
	return chosen, nil
}

// targetKeeper sets an Endpoint's stored target to this listener's when
// the relay says it has become the Endpoint's primary (the one before it
// left) and the stored target is another; it passes every event on.
type targetKeeper struct {
	agentcli.Observer
	ctx    context.Context
	client *apiclient.Client
	host   string
	status io.Writer

	mu     sync.Mutex
	stored map[string]string // Endpoint ID → its stored target, as last read or set
}

func newTargetKeeper(ctx context.Context, o agentcli.Observer, client *apiclient.Client, eps []endpoints.Endpoint, host string, status io.Writer) *targetKeeper {
	k := &targetKeeper{Observer: o, ctx: ctx, client: client, host: host, status: status, stored: map[string]string{}}
	for _, e := range eps {
		if e.Target != nil {
			k.stored[e.ID] = *e.Target
		}
	}
	return k
}

// Role passes the role on and, for a primary whose Endpoint stores another
// target, sets it (off the agent's goroutine: it waits for an API call).
func (k *targetKeeper) Role(e agentcli.RoleEvent) {
	if r, ok := k.Observer.(agentcli.RoleObserver); ok {
		r.Role(e)
	}
	if !e.Primary {
		return
	}
	k.mu.Lock()
	stale := k.stored[e.EndpointID] != k.host
	k.stored[e.EndpointID] = k.host
	k.mu.Unlock()
	if !stale {
		return
	}
	go func() {
		in := map[string]any{"target": k.host}
		q := `mutation($id: ID!, $in: UpdateEndpointInput!){ updateEndpoint(id: $id, input: $in){ id } }`
		if err := k.client.Do(k.ctx, q, map[string]any{"id": e.EndpointID, "in": in}, nil); err != nil && k.ctx.Err() == nil {
			fmt.Fprintf(k.status, "endpoint %s: could not set its target to %s: %v\n", e.EndpointID, k.host, err)
		}
	}()
}

// folderName is the current folder's name, the Endpoint name listen uses
// when given none.
func folderName() string {
	wd, err := os.Getwd()
	name := filepath.Base(wd)
	if err != nil || name == "/" || name == "." || strings.TrimSpace(name) == "" {
		return "relay-listen"
	}
	return name
}

// signatureCheck is --verify's check of a forwarded request, nil without
// --verify. The secret comes from the environment or a file, never from a
// flag (it would show in the process list), and stays on this machine.
func signatureCheck(scheme, secretFile string, env func(string) string) (func([]agentcli.Header, []byte, time.Time) string, error) {
	if scheme == "" {
		if secretFile != "" {
			return nil, cmdutil.Usage(errors.New("--verify-secret-file needs --verify SCHEME"))
		}
		return nil, nil
	}
	if !signatures.Known(scheme) {
		return nil, cmdutil.Usage(fmt.Errorf("--verify %q: want one of %s", scheme, strings.Join(signatures.Schemes(), ", ")))
	}
	secret := env("RELAY_VERIFY_SECRET")
	if secretFile != "" {
		s, err := endpoints.ReadSecretFile("--verify-secret-file", secretFile)
		if err != nil {
			return nil, err
		}
		secret = s
	}
	if secret == "" {
		return nil, cmdutil.Usage(errors.New("--verify needs the signing secret: set RELAY_VERIFY_SECRET or give --verify-secret-file"))
	}
	return func(headers []agentcli.Header, body []byte, at time.Time) string {
		get := func(name string) string {
			for _, h := range headers {
				if strings.EqualFold(h.Name, name) {
					return h.Value
				}
			}
			return ""
		}
		return scheme + " " + signatures.Check(scheme, secret, get, body, at).String()
	}, nil
}
