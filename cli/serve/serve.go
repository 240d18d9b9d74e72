// Package serve is `relay serve`: its flags (config.go), their checks
// (validate.go), and the wiring of the relay's servers (package app).
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/internal/forwarded"
	"github.com/relayhq/relay/internal/tlslisten"
)

// defaultHeaderTimeout bounds the request line and headers of each
// request (serveConfig.headerTimeout): on a new connection counted from its
// accept, on a kept-alive one from the next request's first byte (the
// request line: ingress.TolerateTargets; the headers after it: net/http).
// A client past it is cut off, and its slot of --max-conns-per-ip freed.
const defaultHeaderTimeout = 30 * time.Second

// Command is `relay serve`: the relay itself.
func Command(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use: "serve",
		// What other servers' command lines call running one.
		SuggestFor: []string{"start", "run", "up", "server"},
		Short:      "Run the relay: public addresses, the console and the GraphQL API",
		Example: "  relay serve\n  relay serve --listen 0.0.0.0:8080 --domain relay.example.com --data /var/lib/relay\n" +
			"  RELAY_INSPECTOR_TTL=1h relay serve\n" +
			"  relay serve --listen 0.0.0.0:443 --http-listen 0.0.0.0:80 --domain relay.example.com --tls-cert fullchain.pem --tls-key privkey.pem\n" +
			"  relay serve --public-url https://relay.example.com --console-url https://console.example.org --trusted-proxies 127.0.0.1/32   # behind a TLS proxy, the console on its own site (docs/deploy.md)",
		// relay serve 8080, as other servers take their port: the port is
		// part of --listen.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				if _, err := strconv.ParseUint(args[0], 10, 16); err == nil {
					return cmdutil.Usage(fmt.Errorf("serve: the port is part of --listen: relay serve --listen 127.0.0.1:%s", args[0]))
				}
			}
			return cobra.NoArgs(c, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.BindEnv(cmd.Flags(), env); err != nil {
				return err
			}
			if err := cfg.validate(); err != nil {
				return cmdutil.Usage(err)
			}
			log, err := cmdutil.NewLogger(stderr, cfg.LogLevel)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, log, stdout)
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if msg := err.Error(); msg == "unknown flag: --port" || strings.HasPrefix(msg, "unknown shorthand flag: 'p' in ") {
			err = fmt.Errorf("%w; the port is part of --listen: --listen 127.0.0.1:8080", err)
		}
		return cmdutil.FlagError(c, err)
	})
	cfg.flags(cmd.Flags())
	return cmd
}

func serve(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) error {
	// The heap is small (bodies live in SQLite, not in memory); the soft
	// limit keeps a flood of large answers (history rows to many
	// subscriptions) from leaving several times the live heap as garbage.
	cmdutil.SetGC(os.Getenv, int64(cfg.MemoryLimit.byteSize))
	stop, err := cmdutil.StartProfiles(cfg.CPUProfile, cfg.Trace)
	defer stop()
	if err != nil {
		return err
	}
	if cfg.MemProfile != "" {
		// Every allocation is sampled: a profile of one run tells counts
		// per request, not a sample of them.
		runtime.MemProfileRate = 1
		defer func() {
			if err := writeAllocs(cfg.MemProfile); err != nil {
				log.Warn("memory profile", slog.Any("error", err))
			}
		}()
	}
	// The lock first: a second relay on the same folder is told who holds
	// it, whatever port it asks for.
	lock, err := app.LockData(cfg.Data)
	if err != nil {
		return err
	}
	if err := cfg.resolveSignupStorage(); err != nil {
		_ = lock.Release()
		return err
	}
	// The certificate before any port: one that does not cover the domain
	// is refused before anything starts.
	var certs *tlslisten.Certs
	if cfg.TLSCert != "" {
		if certs, err = tlslisten.Load(cfg.TLSCert, cfg.TLSKey, cfg.Domain, log); err != nil {
			_ = lock.Release()
			return err
		}
		if cfg.console != nil {
			if err := certs.Current().Leaf.VerifyHostname(cfg.console.Hostname()); err != nil {
				_ = lock.Release()
				return fmt.Errorf("TLS certificate %s does not name the console host %s (--console-url): %w", cfg.TLSCert, cfg.console.Hostname(), err)
			}
		}
	}
	ln, err := listen(cfg)
	if err != nil {
		_ = lock.Release()
		return err
	}
	urls := cfg.publicURLs(ln.Addr().(*net.TCPAddr).Port, certs != nil)
	a, err := app.New(ctx, cfg.appConfig(lock, urls, log))
	if err != nil {
		ln.Close()
		return err
	}
	defer func() { // after the drain below: attempts still open answer 503
		if err := a.Close(); err != nil {
			log.Error("close", "error", err)
		}
	}()

	// The sender as a trusted proxy names it, and r.TLS for TLS
	// connections net/http reads as plain ones (see tlslisten.MarkTLS).
	resolver := forwarded.Resolver{Trusted: cfg.trusted, TLS: certs != nil, Scheme: urls.scheme}
	// Requests in flight per client, over all its connections: counted
	// under forwarded.Handler, so a sender behind a trusted proxy counts on
	// its own, and the proxy's own requests (which name no sender) not at
	// all, as its connections are not.
	inFlight := &connguard.InFlight{Max: cfg.MaxRequestsPerIP, MaxPerNetwork: cfg.MaxRequestsPerNet, Unlimited: cfg.trusted.ContainsHost, OnRefuse: a.Metrics().RequestRefused}
	// DisableGeneralOptionsHandler: "OPTIONS *" is a delivery like any other.
	srv := &http.Server{
		// HTTP/2 only (both pass HTTP/1.x through): header fields held to
		// the HTTP/1.x line count, answers a client holds with flow control
		// to --body-timeout of no progress, as the listener's write
		// deadline holds HTTP/1.x answers.
		Handler: connguard.WriteProgress(cfg.BodyTimeout, ingress.HeaderFieldCap(
			tlslisten.MarkTLS(forwarded.Handler(resolver, inFlight.Handler(a.Handler()))))),
		ConnContext:                  tlslisten.ConnContext,
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            cfg.headerTimeout,
		// No deadline for a whole request or response: a large upload or
		// a forward may take long while making progress. BodyProgress and
		// the listener's write deadline end one that stalls instead.
		ReadTimeout:    0,
		WriteTimeout:   0,
		IdleTimeout:    cfg.IdleTimeout,
		MaxHeaderBytes: int(cfg.MaxHeaderBytes),
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// HTTP/2 (over TLS only): MaxHeaderBytes above bounds a stream's
		// headers, IdleTimeout an idle connection; these bound the rest.
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          http2MaxStreams,
			MaxReadFrameSize:              1 << 20,
			MaxReceiveBufferPerConnection: 4 << 20,
			MaxReceiveBufferPerStream:     1 << 20,
			SendPingTimeout:               cfg.IdleTimeout,
			PingTimeout:                   15 * time.Second,
			WriteByteTimeout:              cfg.BodyTimeout,
		},
	}

	srv.RegisterOnShutdown(a.StopStreams)

	// Targets net/http would refuse for their percent-encoding ("/%zz") are
	// deliveries too: see ingress.TolerateTargets.
	served := make(chan error, 1)
	guarded := connguard.NewListener(ln, cfg.MaxConnsPerIP, cfg.BodyTimeout)
	guarded.OnRefuse = a.Metrics().ConnectionRefused
	if cfg.MaxConnsPerNet > 0 {
		guarded.MaxPerNetwork = cfg.MaxConnsPerNet
	}
	// Connections past the descriptor limit would fail accept() and the
	// relay's own file opens: refuse them 503 below it instead.
	nofile, err := connguard.DescriptorLimit()
	if err != nil {
		log.Warn("no relay-wide connection cap", "error", err)
	}
	guarded.MaxOpen = connguard.OpenCap(nofile)
	log.Info("connection caps", "per_ip", cfg.MaxConnsPerIP, "per_network", guarded.MaxPerNetwork,
		"relay", guarded.MaxOpen, "descriptor_limit", nofile,
		"requests_per_ip", cfg.MaxRequestsPerIP, "requests_per_network", clientkey.NetworkCap(cfg.MaxRequestsPerNet, cfg.MaxRequestsPerIP),
		"ws_per_ip", cfg.MaxWSPerIP, "ws_per_network", clientkey.NetworkCap(cfg.MaxWSPerNet, cfg.MaxWSPerIP))
	// A trusted proxy carries many senders' connections: it is not held
	// to one client's cap (it enforces its own).
	guarded.Unlimited = cfg.trusted.ContainsHost
	var sorted net.Listener = guarded
	if certs != nil {
		// Each connection is sorted into TLS and plain after the
		// per-IP cap, so pending handshakes count against it too.
		sorted = tlslisten.NewListener(guarded, certs.Config(), cfg.TLSHandshakeTimeout, log)
		reload := make(chan os.Signal, 1)
		signal.Notify(reload, syscall.SIGHUP)
		defer signal.Stop(reload)
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go certs.Watch(wctx, cfg.TLSReloadInterval, reload)
	}
	tolerant := ingress.TolerateTargets(srv, sorted)
	go func() { served <- srv.Serve(tolerant) }()
	fmt.Fprintf(stdout, "relay listening on %s\n  console:   %s\n  graphql:   %s/graphql\n  addresses: %s\n  data:      %s\n",
		ln.Addr(), urls.console(), urls.console(), urls.address("<id>"), cfg.Data)
	log.Info("relay started", "listen", cfg.Listen, "http_listen", cfg.HTTPListen, "tls", certs != nil,
		"public_url", urls.bare(), "console_url", urls.console(), "domain", cfg.Domain, "data", cfg.Data)
	warnDeployment(log, cfg, urls)
	logAccountQuotas(ctx, log, cfg, a)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Drain: stop accepting, let in-flight deliveries finish their appends.
	log.Info("shutting down: draining in-flight requests", "grace", cfg.ShutdownGrace)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

// warnDeployment logs, once at start, what in the configuration leaves
// accounts open to attack.
func warnDeployment(log *slog.Logger, cfg serveConfig, urls publicURLs) {
	if cfg.sharedSiteRisk(urls) {
		log.Warn("the console shares its site with the addresses over plain HTTP: a page at any address (an Endpoint's local answer) "+
			"can set a session cookie for "+cfg.Domain+" and sign a signed-out visitor's console in as someone else (cookie tossing); "+
			"serve the console on its own domain with --console-url, and over HTTPS (docs/deploy.md)",
			"domain", cfg.Domain, "console_url", urls.console())
	}
	if cfg.SignInRate.Off() {
		log.Warn("--signin-rate off: password sign-ins, sign-ups and member joins are not rate-limited; passwords may be guessed as fast as the relay answers")
	}
}

// logAccountQuotas logs, once at start, the accounts' quotas in force and
// whether they were given or are --signup's defaults, and warns of the
// accounts already past the default storage quota: their deliveries are
// refused 507 until the operator raises it.
func logAccountQuotas(ctx context.Context, log *slog.Logger, cfg serveConfig, a *app.App) {
	from := func(set func() bool) string {
		if set != nil && set() {
			return "given"
		}
		return "default with --signup " + string(cfg.Signup)
	}
	log.Info("account quotas", "signup", string(cfg.Signup),
		"account_storage", cfg.AccountStorage.String(), "account_storage_from", from(cfg.accountStorageSet),
		"account_rate", cfg.AccountRate.String(), "account_rate_from", from(cfg.accountRateSet),
		"account_api_cost", cfg.AccountAPICost.String(), "account_endpoints", cfg.AccountEndpoints,
		"signup_storage", cfg.SignupStorage.String(), "signup_storage_bytes", cfg.signupStorageBytes, "signup_storage_from", from(cfg.signupStorageSet))
	if total, _ := a.Views().SignupStored(""); cfg.signupStorageBytes > 0 && total >= cfg.signupStorageBytes {
		log.Warn("the accounts made by open sign-up hold --signup-storage: their Endpoints answer 507 "+
			"until retention deletes enough, the budget is raised, or the operator gives a trusted account a storage quota of its own "+
			"(relay accounts set-quota ACCOUNT --storage SIZE|off)",
			"stored", humanize.IBytes(uint64(total)), "signup_storage", humanize.IBytes(uint64(cfg.signupStorageBytes)))
	}
	if cfg.AccountStorage.byteSize == 0 {
		return
	}
	top, err := a.Service().TopUsage(ctx, a.Views().Accounts, startUsageRows)
	if err != nil {
		log.Warn("account quotas: read the accounts' usage", "error", err)
		return
	}
	for _, u := range top {
		if u.StorageQuota == domain.QuotaDefault && u.StoredBytes >= u.Storage {
			log.Warn("account past the default storage quota: its Endpoints answer 507 until retention deletes enough or its quota is raised "+
				"(relay accounts set-quota ACCOUNT --storage SIZE|off, or --account-storage)",
				"account_id", u.AccountID, "stored", humanize.IBytes(uint64(u.StoredBytes)), "account_storage", cfg.AccountStorage.String())
		}
	}
}

// startUsageRows is how many accounts, most stored bytes first, the start
// looks at for logAccountQuotas' warning.
const startUsageRows = 20

// http2MaxStreams bounds the requests one HTTP/2 connection carries at
// once (Go's default, made explicit).
const http2MaxStreams = 250

// listen opens --listen, and --http-listen beside it as one listener
// (both share the server and its per-IP cap).
func listen(cfg serveConfig) (net.Listener, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, listenError("--listen", cfg.Listen, err)
	}
	if cfg.HTTPListen == "" {
		return ln, nil
	}
	plain, err := net.Listen("tcp", cfg.HTTPListen)
	if err != nil {
		ln.Close()
		return nil, listenError("--http-listen", cfg.HTTPListen, err)
	}
	return tlslisten.Merge(ln, plain), nil
}

// listenError says why flag's address could not be listened on and what
// to do, for the two causes a user meets: a port another program (often
// a relay started before) holds, and a port below 1024 without the
// privilege; other errors as the system gave them.
func listenError(flag, addr string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%s %s: the address is in use by another program (a relay started earlier?): stop it, or give another port, e.g. %s %s", flag, addr, flag, otherPort(addr))
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s %s: permission denied (a port below 1024 needs root or CAP_NET_BIND_SERVICE): give a port from 1024, e.g. %s %s, or see docs/deploy.md", flag, addr, flag, otherPort(addr))
	}
	return fmt.Errorf("%s %s: %w", flag, addr, err)
}

// otherPort is addr on the next port (on 8081 when addr's port is not a
// number or is the last one), for the example of listenError.
func otherPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n < 1024 || n >= 65535 {
		return net.JoinHostPort(host, "8081")
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// publicURLs builds the URLs users see.
type publicURLs struct {
	scheme string
	domain string
	port   int // 0: the scheme's default
	// consoleSite is --console-url without its path, with the public
	// URLs' port when it names none; "" when the console is on the bare
	// domain.
	consoleSite string
}

// publicURLs is what --public-url says, or else https with TLS and http
// without, the domain, and --public-port or the port listened on.
func (c *serveConfig) publicURLs(listenPort int, tls bool) publicURLs {
	var u publicURLs
	if p := c.publicURL; p != nil {
		port, _ := strconv.Atoi(p.Port())
		u = publicURLs{scheme: p.Scheme, domain: c.Domain, port: port}
	} else {
		u = publicURLs{scheme: "http", domain: c.Domain, port: c.PublicPort}
		if tls {
			u.scheme = "https"
		}
		if u.port == 0 {
			u.port = listenPort
		}
	}
	if cu := c.console; cu != nil {
		port, _ := strconv.Atoi(cu.Port())
		if port == 0 {
			port = u.port
		}
		site := publicURLs{scheme: cu.Scheme, domain: strings.ToLower(cu.Hostname()), port: port}
		if strings.Contains(site.domain, ":") { // an IPv6 literal
			site.domain = "[" + site.domain + "]"
		}
		u.consoleSite = site.bare()
	}
	return u
}

// console is the console's URL: its own host's, or the bare domain's.
func (u publicURLs) console() string {
	if u.consoleSite != "" {
		return u.consoleSite
	}
	return u.bare()
}

func (u publicURLs) host(prefix string) string {
	h := prefix + u.domain
	if u.port != 0 && u.port != 80 && u.port != 443 {
		h += ":" + strconv.Itoa(u.port)
	}
	return h
}

func (u publicURLs) bare() string             { return u.scheme + "://" + u.host("") }
func (u publicURLs) address(id string) string { return u.scheme + "://" + u.host(id+".") + "/" }

// writeAllocs writes the allocations of the whole run to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
