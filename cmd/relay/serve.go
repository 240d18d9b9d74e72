package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/console"
	"github.com/relayhq/relay/console/graphiql"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/esdb"
	"github.com/relayhq/relay/eventstore/jetstream"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/internal/datalock"
	"github.com/relayhq/relay/internal/sqlitedsn"
	"github.com/relayhq/relay/metrics"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// headerTimeout bounds the request line and headers of each request,
// counted from the first byte the server waits for (a new connection or the
// next request on a kept-alive one).
const headerTimeout = 30 * time.Second

// maxAnonymousClients bounds the map of per-client buckets of the
// anonymous rate limit (see ratelimit.Keyed).
const maxAnonymousClients = 100_000

func serveCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var cfg serveConfig
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the relay: public addresses, the console and the GraphQL API",
		Example: "  relay serve\n  relay serve --listen 0.0.0.0:8080 --domain relay.example.com --data /var/lib/relay\n" +
			"  RELAY_INSPECTOR_TTL=1h relay serve",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd.Flags(), env); err != nil {
				return err
			}
			if err := cfg.validate(); err != nil {
				return err
			}
			log, err := newLogger(stderr, cfg.LogLevel)
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, log, stdout)
		},
	}
	cfg.flags(cmd.Flags())
	return cmd
}

// app is the opened core: the data folder's lock, the log, the views and
// their runner.
type app struct {
	lock  *datalock.Lock
	store domain.EventStore
	views *projections.Runner
	codec *domain.Codec
	rec   *record.Recorder // the one writer of the log
	done  chan error
	stop  context.CancelFunc
}

// appOptions say how openApp treats the views.
type appOptions struct {
	// fresh removes the views file first: they are rebuilt from position 0.
	fresh bool
	// lenient starts even when the views cannot catch up with the log (a
	// full disk): the runner keeps retrying and /readyz says why. A damaged
	// log is refused either way.
	lenient bool
	// lock is the data folder's lock when the caller took it already;
	// openApp takes it otherwise. Either way app.close releases it.
	lock *datalock.Lock
}

// openApp locks the data folder, opens the event log and the views under
// dir, checks that the views describe this log (else rebuilds them) and
// starts feeding them; they have caught up with the log when it returns
// (unless opts.lenient and they cannot).
func openApp(ctx context.Context, dir, eventstoreURL string, log *slog.Logger, opts appOptions) (*app, error) {
	lock := opts.lock
	if lock == nil {
		var err error
		if lock, err = lockData(dir); err != nil {
			return nil, err
		}
	}
	store, err := openStore(ctx, dir, eventstoreURL, log)
	if err != nil {
		lock.Release()
		return nil, logDamaged(dir, err)
	}
	viewsPath := filepath.Join(dir, "views.db")
	if opts.fresh {
		if err := projections.RemoveFiles(viewsPath); err != nil {
			store.Close()
			lock.Release()
			return nil, fmt.Errorf("remove views: %w", err)
		}
	}
	codec := domain.NewCodec()
	views, err := projections.Open(ctx, viewsPath, store, projections.Options{Logger: log, Codec: codec})
	if err != nil {
		store.Close()
		lock.Release()
		return nil, fmt.Errorf("open views: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	rec := record.New(record.Config{Store: store, Codec: codec, Logger: log})
	a := &app{lock: lock, store: store, views: views, codec: codec, rec: rec, done: make(chan error, 1), stop: stop}
	if err := views.Reconcile(ctx); err != nil {
		a.done <- nil
		a.close()
		return nil, logDamaged(dir, err)
	}
	go func() { a.done <- views.Run(runCtx) }()
	last, err := store.LastPosition(ctx)
	if err == nil {
		err = views.CatchUp(ctx, last)
	}
	switch {
	case err == nil:
	case opts.lenient && ctx.Err() == nil && !sqlitedsn.Damaged(err):
		log.Error("starting with the views behind the log: commands that wait for them fail with UNAVAILABLE and /readyz answers 503 until they catch up",
			"views_position", views.Position(), "log_position", last, "err", err)
	default:
		a.close()
		return nil, fmt.Errorf("catch up views: %w", logDamaged(dir, err))
	}
	return a, nil
}

// lockData creates the data folder if needed and locks it.
func lockData(dir string) (*datalock.Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	return datalock.Acquire(dir)
}

// logDamaged turns a damaged event log into a clear refusal: the log is the
// only copy of what was received, so it is never repaired or replaced here.
func logDamaged(dir string, err error) error {
	if !sqlitedsn.Damaged(err) {
		return err
	}
	return fmt.Errorf("the event log %s is damaged (%w); it is never repaired automatically: keep a copy of the file, "+
		"find the first bad position with `relay events verify --data %s`, and restore the data folder from a backup",
		filepath.Join(dir, "events.db"), err, dir)
}

// openStore opens the event log: NATS JetStream for nats:// and tls://
// URLs, EventStoreDB for any other URL, else the embedded SQLite log under
// dir.
func openStore(ctx context.Context, dir, eventstoreURL string, log *slog.Logger) (domain.EventStore, error) {
	if jetstream.IsURL(eventstoreURL) {
		servers, opts, err := jetstream.ParseURL(eventstoreURL)
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		opts.Logger = log
		s, err := jetstream.Open(ctx, servers, opts)
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		return s, nil
	}
	if eventstoreURL != "" {
		s, err := esdb.Open(ctx, eventstoreURL, esdb.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		return s, nil
	}
	s, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	return s, nil
}

func (a *app) close() error {
	a.stop()
	runErr := <-a.done
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	return errors.Join(runErr, a.views.Close(), a.store.Close(), a.lock.Release())
}

func serve(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) error {
	if os.Getenv("GOGC") == "" {
		// The heap is small (bodies live in SQLite, not in memory), so a
		// higher GC target costs a few MiB and saves CPU on every request.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" && cfg.MemoryLimit.byteSize > 0 {
		// With the high GC target above, a flood of large answers (history
		// rows to many subscriptions) leaves several times the live heap as
		// garbage; the soft limit makes the GC collect it sooner instead.
		debug.SetMemoryLimit(int64(cfg.MemoryLimit.byteSize))
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if cfg.Trace != "" {
		f, err := os.Create(cfg.Trace)
		if err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		if err := trace.Start(f); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	// The lock first: a second relay on the same folder is told who holds
	// it, whatever port it asks for.
	lock, err := lockData(cfg.Data)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		lock.Release()
		return fmt.Errorf("listen: %w", err)
	}
	a, err := openApp(ctx, cfg.Data, cfg.EventStore, log, appOptions{lenient: true, lock: lock})
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		if err := a.close(); err != nil {
			log.Error("close", "err", err)
		}
	}()

	// One process holds every agent session, so forwards go straight to
	// the Hub (Hub.Forward); no bus is needed until several nodes share
	// the sessions.
	hub := tunnel.NewHub(tunnel.HubConfig{Recorder: a.rec, Logger: log}, nil)
	defer hub.Close() // after the drain below: attempts still open answer 503
	if err := closeStaleAgents(ctx, a.views, hub); err != nil {
		return err
	}
	if err := failStaleAttempts(ctx, a.views, a.rec, log); err != nil {
		return err
	}

	port := cfg.PublicPort
	if port == 0 {
		port = ln.Addr().(*net.TCPAddr).Port
	}
	urls := publicURLs{domain: cfg.Domain, port: port}
	svc := commands.New(commands.Config{InspectorTTL: cfg.InspectorTTL, ForwardTimeout: cfg.ForwardTimeout, SignupOpen: cfg.Signup, ViewsWait: cfg.ViewsWait},
		a.store, a.rec, a.views, hub, hub, log)
	var anonymous *ratelimit.Keyed
	if !cfg.AnonymousRate.Off() {
		anonymous = ratelimit.NewKeyed(cfg.AnonymousRate, maxAnonymousClients)
	}
	gql := graph.NewHandler(&graph.Resolver{
		Service: svc, Views: a.views, Log: a.store, Hub: hub, PublicURL: urls.address, Logger: log, AdminToken: cfg.AdminToken, Now: time.Now,
		Anonymous: anonymous,
	}, graph.ServerOptions{
		KeepAlive: cfg.KeepAlive, MaxWSMessage: int64(cfg.MaxWSMessage), MaxAgentAnswer: int64(cfg.MaxBody),
		MaxWSSubscriptions: cfg.MaxWSSubscriptions, MaxWSPerIP: cfg.MaxWSPerIP,
		Playground: graphiql.Handler("relay GraphQL", "/graphql", "/assets/graphiql/"),
		Limits: graph.Limits{
			MaxBody: int64(cfg.MaxAPIBody), MaxCost: cfg.MaxQueryCost, MaxFields: cfg.MaxQueryFields,
			MaxTokens: cfg.MaxQueryTokens, CaptureCap: int64(cfg.CaptureCap),
		},
	})

	met := metrics.New()
	met.Positions(a.store.LastPosition, a.views.Position)
	met.ViewsFailing(func() bool { return a.views.Health().Err != nil })
	health := &healthCheck{store: a.store, views: a.views, stall: cfg.ViewsWait}
	bare := http.NewServeMux()
	bare.Handle("/metrics", met.Handler())
	bare.Handle("/graphql", gql)
	bare.Handle("/assets/graphiql/", graphiql.AssetsHandler())
	bare.HandleFunc("/healthz", health.liveness)
	bare.HandleFunc("/readyz", health.readiness)
	bare.Handle("/", console.Handler())

	in := ingress.New(ingress.Config{
		Domain: cfg.Domain, CaptureCap: int64(cfg.CaptureCap), MaxBody: int64(cfg.MaxBody),
		ForwardTimeout: cfg.ForwardTimeout, MaxHeaders: cfg.MaxHeaders, MaxHeaderBytes: int64(cfg.MaxHeaderBytes), Logger: log,
		AddressRate: cfg.AddressRate, RefusalInterval: cfg.RefusalInterval, InspectorQuota: int64(cfg.InspectorQuota.byteSize),
	}, ingress.Deps{
		Recorder: a.rec, Resolver: addressResolver{a.views.Addresses}, Forwarder: hub, Bare: bare,
	})
	// DisableGeneralOptionsHandler: "OPTIONS *" is a delivery like any other.
	area := func(r *http.Request) string {
		if _, isBare, _ := ingress.ParseHost(r.Host, cfg.Domain); isBare {
			return "api"
		}
		return "address"
	}
	srv := &http.Server{
		Handler:                      connguard.BodyProgress(cfg.BodyTimeout, met.Instrument(in.Handler(), area)),
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            headerTimeout,
		// No deadline for a whole request or response: a large upload or
		// a forward may take long while making progress. BodyProgress and
		// the listener's write deadline end one that stalls instead.
		ReadTimeout:    0,
		WriteTimeout:   0,
		IdleTimeout:    cfg.IdleTimeout,
		MaxHeaderBytes: int(cfg.MaxHeaderBytes),
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	// Background work: refusal counts into the log, the retention sweep.
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	bgDone := make(chan struct{}, 2)
	go func() { _ = in.RecordRefusals(bgCtx); bgDone <- struct{}{} }()
	go func() {
		_ = svc.RunRetention(bgCtx, cfg.retentionSweep(), cfg.InspectorRetention)
		bgDone <- struct{}{}
	}()
	defer func() { stopBg(); <-bgDone; <-bgDone }()

	// Targets net/http would refuse for their percent-encoding ("/%zz") are
	// deliveries too: see ingress.TolerateTargets.
	served := make(chan error, 1)
	guarded := connguard.NewListener(ln, cfg.MaxConnsPerIP, cfg.BodyTimeout)
	guarded.OnRefuse = met.ConnectionRefused
	tolerant := ingress.TolerateTargets(srv, guarded)
	go func() { served <- srv.Serve(tolerant) }()
	fmt.Fprintf(stdout, "relay listening on %s\n  console:   %s\n  graphql:   %s/graphql\n  addresses: %s\n  data:      %s\n",
		ln.Addr(), urls.bare(), urls.bare(), urls.address("<id>"), cfg.Data)
	log.Info("relay started", "listen", ln.Addr().String(), "domain", cfg.Domain, "data", cfg.Data)

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

// closeStaleAgents records the end of agent sessions a crash left open.
func closeStaleAgents(ctx context.Context, views interface {
	OpenAgentSessions(context.Context) ([]readmodel.AgentSession, error)
}, hub *tunnel.Hub) error {
	open, err := views.OpenAgentSessions(ctx)
	if err != nil {
		return fmt.Errorf("read agent sessions: %w", err)
	}
	stale := make([]tunnel.StaleSession, 0, len(open))
	for _, s := range open {
		stale = append(stale, tunnel.StaleSession{EndpointID: s.EndpointID, AgentID: s.AgentID})
	}
	if err := hub.CloseStale(ctx, stale); err != nil {
		return fmt.Errorf("close stale agent sessions: %w", err)
	}
	return nil
}

// failStaleAttempts records the end of forwards a crash left open: their
// sender and agent went with the process, so no outcome will ever come.
func failStaleAttempts(ctx context.Context, views interface {
	OpenAttempts(context.Context) ([]readmodel.OpenAttempt, error)
}, rec *record.Recorder, log *slog.Logger) error {
	open, err := views.OpenAttempts(ctx)
	if err != nil {
		return fmt.Errorf("read open attempts: %w", err)
	}
	if len(open) == 0 {
		return nil
	}
	stale := make([]record.StaleAttempt, 0, len(open))
	for _, a := range open {
		stale = append(stale, record.StaleAttempt{DeliveryID: a.DeliveryID, AttemptID: a.AttemptID})
	}
	log.Warn("recording forwards a previous run left without an answer as failed", "attempts", len(stale))
	if err := rec.FailStale(ctx, stale); err != nil {
		return fmt.Errorf("fail stale attempts: %w", err)
	}
	return nil
}

// publicURLs builds the URLs users see.
type publicURLs struct {
	domain string
	port   int
}

func (u publicURLs) host(prefix string) string {
	h := prefix + u.domain
	if u.port != 80 && u.port != 443 {
		h += ":" + strconv.Itoa(u.port)
	}
	return h
}

func (u publicURLs) bare() string             { return "http://" + u.host("") }
func (u publicURLs) address(id string) string { return "http://" + u.host(id+".") + "/" }

// addressResolver adapts the views to what ingress needs to route a request.
type addressResolver struct {
	views interface {
		Address(ctx context.Context, id string) (readmodel.Address, error)
	}
}

func (r addressResolver) Resolve(ctx context.Context, id string) (ingress.Route, error) {
	a, err := r.views.Address(ctx, id)
	if err != nil {
		return ingress.Route{}, err
	}
	return ingress.Route{
		ID: a.ID, Kind: a.Kind, AccountID: a.AccountID, Mode: a.Mode, ResponseCapture: a.ResponseCapture,
		Deleted: a.Deleted, Expired: a.Expired, LastActivityAt: a.LastActivityAt, ExpiresAt: a.ExpiresAt,
		StoredBytes: a.StoredBytes,
	}, nil
}
