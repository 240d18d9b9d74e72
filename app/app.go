package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/relayhq/relay/cluster"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/console"
	"github.com/relayhq/relay/console/graphiql"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/jetstream"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/graph/wsgql"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/connguard"
	"github.com/relayhq/relay/internal/datalock"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/internal/sqlitedsn"
	"github.com/relayhq/relay/logexport"
	"github.com/relayhq/relay/metrics"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/tunnel"
)

// maxAnonymousClients bounds the map of per-client buckets of the
// anonymous rate limit (see ratelimit.Keyed).
const maxAnonymousClients = 100_000

// Config is everything the relay is built from. Zero values of the nested
// configurations take their packages' defaults.
type Config struct {
	// Data is the data folder: the embedded log (unless EventStore names
	// another) and the views live there.
	Data       string
	EventStore string // see OpenStore; empty: the embedded log under Data
	Logger     *slog.Logger

	// Lock is the data folder's lock when the caller took it already; New
	// takes it otherwise. Either way Close releases it (and New does when
	// it fails).
	Lock *datalock.Lock
	// FreshViews removes the views file first: they are rebuilt from
	// position 0.
	FreshViews bool
	// Lenient starts even when the views cannot catch up with the log (a
	// full disk): the runner keeps retrying and /readyz says why. A damaged
	// log is refused either way.
	Lenient bool
	// NoSweeps skips the start-up sweeps (the agent sessions and forwards
	// a crashed run left open are left for the next server to close) and
	// starts no background work: for a command that appends and exits, and
	// for tests that drive the service themselves.
	NoSweeps bool

	// PublicURL builds a public address's URL from its id.
	PublicURL  func(id string) string
	AdminToken string
	// AnonymousRate limits anonymous use of the API per client; Off: none.
	AnonymousRate ratelimit.Rate
	// SignInRate limits password sign-ins per login (graph.Resolver.SignInRate);
	// NoSignInLimit turns those limits off.
	SignInRate    ratelimit.Rate
	NoSignInLimit bool
	// ConsoleURL is the console's own URL when it has a host of its own
	// (--console-url): the console is served there (Ingress.ConsoleSite),
	// the bare domain keeps the API for tokens without session cookies and
	// sends browsers to the console, and the links the API returns use it.
	// Empty: the console is on the bare domain.
	ConsoleURL string

	Commands commands.Config
	// API's Playground is set by New.
	API     graph.ServerOptions
	Ingress ingress.Config
	// BodyTimeout ends a request whose body makes no progress for this
	// long (see connguard.BodyProgress).
	BodyTimeout time.Duration
	// RetentionSweep is how often expired inspectors are looked for, and
	// InspectorRetention how long their deliveries are kept.
	RetentionSweep, InspectorRetention time.Duration
	// EndpointRetentionSweep is how often Endpoints' deliveries past their
	// window are looked for (the windows are Commands.Retention's); 0:
	// never.
	EndpointRetentionSweep time.Duration
	// QueuePoll is how often an idle queue driver reads the queue view
	// (docs/queue.md); 0: 100 ms.
	QueuePoll time.Duration
	// CheckpointInterval is how often the log's chain is signed (the embedded
	// log's head, or every stream's head on JetStream; package evidence): 0
	// never. CheckpointKey is the signing key's file;
	// empty: checkpoint.key in the data folder, created at first start.
	CheckpointInterval time.Duration
	CheckpointKey      string
	// SecretsKey is the file of the key that keeps the addresses' handshake
	// secrets and the members' password hashes out of the log in plain
	// text (package secrets); empty:
	// secrets.key in the data folder, created at first start. The nodes of
	// a cluster must share it.
	SecretsKey string

	// Bus lists the NATS servers (nats:// URLs, a cluster's seeds) of the
	// bus between relay nodes sharing one log; empty: a single process.
	Bus []string
	// Node names this node (agent sessions and attempts record it); empty:
	// the name kept in the data folder, generated on first start.
	Node string
	// Sessions caps the agent sessions open at once, per Endpoint and
	// per account (--max-endpoint-sessions, --max-account-sessions).
	Sessions tunnel.SessionCaps

	// NodeLease is how long a node may go unheard on the bus before the
	// others settle its forwards and close its agent sessions; default
	// cluster.DefaultLease.
	NodeLease time.Duration

	// MinFreeDisk is the relay-wide reserve of free disk under Data
	// (package diskreserve); the zero Limit: none. DiskSpace reads the free
	// space; nil: statfs on Data.
	MinFreeDisk diskreserve.Limit
	DiskSpace   diskreserve.Source

	// WrapStore, when set, wraps the opened log before anything uses it:
	// the seam through which tests inject faults (a stalled append) into
	// the one write path. Nil in production.
	WrapStore func(domain.EventStore) domain.EventStore
}

// App is the opened relay: its log, views and the components over them.
type App struct {
	// stopStreams ends the open smee streams (ingress.Server.StopStreams).
	stopStreams func()
	// sockets closes the API's WebSockets with 1001 (Close).
	sockets *wsgql.GoAway

	lock  *datalock.Lock
	store domain.EventStore
	views *projections.Runner
	codec *domain.Codec
	rec   *record.Recorder // the one writer of the log
	hub   *tunnel.Hub
	// bodies is the memory forwarded bodies hold: PROXY bodies, the
	// queue's attempts and copies to other listeners (--proxy-body-budget).
	bodies   *ingress.BodyBudget
	disk     *diskreserve.Reserve // nil: no reserve
	svc      *commands.Service
	metrics  *metrics.Metrics
	handler  http.Handler
	runDone  chan error
	stopRun  context.CancelFunc
	stopBg   context.CancelFunc
	bgDone   chan struct{}
	bgCount  int
	closeHub bool
	node     string
	cluster  *clusterLink      // nil: a single process
	chain    chained           // the log's chain; nil when the log keeps none
	logAsIs  domain.EventStore // the log as opened, before WrapStore: what the export reads
}

// New locks the data folder, opens the event log and the views, checks
// that the views describe this log (else rebuilds them), starts feeding
// them and wires everything over them; the views have caught up with the
// log when it returns (unless cfg.Lenient and they cannot).
func New(ctx context.Context, cfg Config) (*App, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := open(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	if err := a.wire(ctx, cfg, log); err != nil {
		return nil, errors.Join(err, a.Close())
	}
	return a, nil
}

// open is the core: lock, log, views and the recorder.
func open(ctx context.Context, cfg Config, log *slog.Logger) (*App, error) {
	dir := cfg.Data
	lock := cfg.Lock
	if lock == nil {
		var err error
		if lock, err = LockData(dir); err != nil {
			return nil, err
		}
	}
	store, err := OpenStore(ctx, dir, cfg.EventStore, log)
	if err != nil {
		_ = lock.Release()
		return nil, logDamaged(dir, err)
	}
	chain, _ := store.(chained)
	logAsIs := store
	if cfg.WrapStore != nil {
		store = cfg.WrapStore(store)
	}
	viewsPath := filepath.Join(dir, "views.db")
	if cfg.FreshViews {
		if err := projections.RemoveFiles(viewsPath); err != nil {
			store.Close()
			_ = lock.Release()
			return nil, fmt.Errorf("remove views: %w", err)
		}
	}
	node, err := cluster.NodeID(dir, cfg.Node)
	if err != nil {
		store.Close()
		_ = lock.Release()
		return nil, fmt.Errorf("node id: %w", err)
	}
	codec := domain.NewCodec()
	viewsOpts := projections.Options{Logger: log, Codec: codec}
	if jetstream.IsURL(cfg.EventStore) {
		viewsOpts.StallAfter = projections.NATSStallAfter
	}
	views, err := projections.Open(ctx, viewsPath, store, viewsOpts)
	if err != nil {
		store.Close()
		_ = lock.Release()
		return nil, fmt.Errorf("open views: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	space := cfg.DiskSpace
	if space == nil {
		space = diskreserve.Statfs{Dir: dir}
	}
	disk := diskreserve.New(diskreserve.Config{Source: space, Limit: cfg.MinFreeDisk, Logger: log, Dir: dir})
	rec := record.New(record.Config{Store: store, Codec: codec, Logger: log, Node: node, Usage: views,
		WhyNotStored: whyNotStored(views, cfg.Commands.Quotas, cfg.Commands.SignupStorage, disk)})
	a := &App{disk: disk, lock: lock, store: store, views: views, codec: codec, rec: rec, runDone: make(chan error, 1), stopRun: stop, node: node, chain: chain, logAsIs: logAsIs}
	if err := views.Reconcile(ctx); err != nil {
		a.runDone <- nil
		a.Close()
		return nil, logDamaged(dir, err)
	}
	go func() { a.runDone <- views.Run(runCtx) }()
	last, err := store.LastPosition(ctx)
	if err == nil {
		err = views.CatchUp(ctx, last)
	}
	switch {
	case err == nil:
	case cfg.Lenient && ctx.Err() == nil && !sqlitedsn.Damaged(err):
		log.Error("starting with the views behind the log: commands that wait for them fail with UNAVAILABLE and /readyz answers 503 until they catch up",
			"views_position", views.Position(), "log_position", last, "error", err)
	default:
		a.Close()
		return nil, fmt.Errorf("catch up views: %w", logDamaged(dir, err))
	}
	return a, nil
}

// wire builds the components over the core and starts the background work.
func (a *App) wire(ctx context.Context, cfg Config, log *slog.Logger) error {
	// PROXY bodies, the queue's attempts and copies to other listeners
	// share one body budget.
	a.bodies = ingress.NewBodyBudget(cfg.Ingress.ProxyBodyBudget, cfg.Ingress.MaxBody)
	// One process holds every agent session, so forwards go straight to
	// the Hub (Hub.Forward); the bus carries them only between nodes.
	if len(cfg.Bus) > 0 {
		link, err := joinCluster(ctx, cfg, a, log)
		if err != nil {
			return err
		}
		a.cluster, a.hub = link, link.hub
	} else {
		a.hub = tunnel.NewHub(tunnel.HubConfig{Recorder: a.rec, Logger: log, Node: a.node, Bodies: a.bodies, Sessions: cfg.Sessions})
	}
	a.closeHub = true
	cfg.Commands.Disk = a.disk
	cfg.Commands.Bodies = a.bodies // a retry's request, while it is out
	if !cfg.NoSweeps {
		// A node closes only what it left open itself (and what a log
		// older than node names holds): the other nodes' sessions and
		// attempts are live.
		mine := func(node string) bool { return a.cluster == nil || node == a.node || node == "" }
		if err := recoverGone(ctx, a.views, a.hub, a.rec, log, mine, restarted); err != nil {
			return err
		}
	}
	if cfg.Commands.MaxBody == 0 {
		cfg.Commands.MaxBody = cfg.Ingress.MaxBody // an edited retry is held to the ingress's limit
	}
	keys := cfg.Commands.Secrets // a test's own, else the relay's
	if keys == nil {
		var err error
		if keys, err = secretsKey(cfg, log); err != nil {
			return err
		}
		cfg.Commands.Secrets = keys
	}
	a.svc = commands.New(cfg.Commands, a.store, a.rec, a.views, a.hub, a.hub, log)
	var anonymous, anonymousNetworks *ratelimit.Keyed
	if r := cfg.AnonymousRate; !r.Off() {
		anonymous = ratelimit.NewKeyed(r, maxAnonymousClients)
		anonymousNetworks = ratelimit.NewKeyed(ratelimit.Rate{N: graph.AnonymousNetworkShare * r.N, Per: r.Per,
			Burst: graph.AnonymousNetworkShare * r.Burst}, maxAnonymousClients)
	}
	api := cfg.API
	a.sockets = wsgql.NewGoAway()
	api.GoAway = a.sockets
	// Agents' answers read from their sockets take their room in the body
	// budget, as the bodies they answer do: one client address's sockets
	// a quarter of it whatever accounts they sign in to, one account's a
	// quarter.
	api.MessageBudget = a.bodies
	api.Playground = graphiql.Handler("relay GraphQL", "/graphql", "/assets/graphiql/")
	var in *ingress.Server // made below; the API reads its quota refusals
	resolver := &graph.Resolver{
		Service: a.svc, Views: a.views, Log: a.store, Hub: a.hub, PublicURL: cfg.PublicURL, Logger: log, AdminToken: cfg.AdminToken, Now: time.Now,
		Anonymous: anonymous, AnonymousNetworks: anonymousNetworks, SignInRate: cfg.SignInRate, NoSignInLimit: cfg.NoSignInLimit, ConsoleURL: cfg.ConsoleURL,
		Quotas: a.views.Accounts, QuotaRefusals: func(id string) map[string]int64 { return in.QuotaRefusals(id) },
		APICost: cfg.Commands.Quotas.APICost,
	}
	gql := graph.NewHandler(resolver, api)

	a.metrics = metrics.New()
	a.metrics.Positions(a.store.LastPosition, a.views.Position)
	a.metrics.ViewsFailing(func() bool { return a.views.Health().Err != nil })
	health := &healthCheck{store: a.store, views: a.views, stall: cfg.Commands.ViewsWait}
	if a.cluster != nil {
		health.bus = a.cluster.problem
	}
	routes := func(gql http.Handler, pages http.Handler) *http.ServeMux {
		m := http.NewServeMux()
		m.Handle("/metrics", a.metrics.Handler())
		m.Handle("/graphql", gql)
		m.Handle("/new", resolver.NewSmeeChannel()) // smee.io's route (docs/smee.md)
		m.Handle("/log/export", logexport.Handler(a.logAsIs, cfg.AdminToken, log))
		m.Handle("/assets/graphiql/", graphiql.AssetsHandler())
		m.HandleFunc("/healthz", health.liveness)
		m.HandleFunc("/readyz", health.readiness)
		m.Handle("/", pages)
		return m
	}
	bare := routes(gql, console.Handler())
	inCfg := cfg.Ingress
	inCfg.Logger = log
	inCfg.GuestStorage = cfg.Commands.GuestStorage   // one bound, asked by createInspector and ingress
	inCfg.SignupStorage = cfg.Commands.SignupStorage // one bound, asked by signUp, settings and ingress
	deps := ingress.Deps{
		Bodies: a.bodies, Recorder: a.rec, Resolver: addressResolver{views: a.views.Addresses, accounts: a.views.Accounts, quotas: cfg.Commands.Quotas, guests: a.views.Addresses, signups: a.views.Accounts}, Forwarder: a.hub, Bare: bare,
		Feed: a.views.History, QueueDepth: a.views.QueueDepth, Disk: a.disk,
	}
	if cfg.ConsoleURL != "" {
		// The console on its own site: the bare domain shares a site with
		// every address page, so it keeps the API for tokens only.
		deps.Console = bare
		deps.Bare = routes(graph.WithoutCookies(cfg.ConsoleURL, gql), toConsole(cfg.ConsoleURL))
		inCfg.ConsoleSite = cfg.ConsoleURL
	}
	if keys != nil {
		deps.Secrets = keys
	}
	in = ingress.New(inCfg, deps)
	a.stopStreams = in.StopStreams
	a.metrics.Quotas(in.QuotaRefusalTotals, func(ctx context.Context) (int64, error) {
		_, total, err := a.views.TopUsage(ctx, 0)
		return total.StoredBytes, err
	})
	a.metrics.DiskReserve(a.disk.State, a.disk.Refusals)
	a.metrics.UnrecordedRefusals(in.RefusalsNotRecorded)
	a.metrics.Guests(func() int64 { total, _ := a.views.Addresses.GuestStored(""); return total }, cfg.Commands.GuestStorage.Total,
		func() map[string]map[string]int64 {
			return map[string]map[string]int64{"delivery": in.GuestRefusals(), "api": a.svc.GuestRefusals()}
		})
	a.metrics.BodyBudget(a.bodies.Total(), a.bodies.InUse, ingress.BudgetShares(), a.bodies.Refusals)
	area := func(r *http.Request) string {
		if _, isBare, _ := ingress.ParseHost(r.Host, cfg.Ingress.Domain); isBare || in.IsConsole(r) {
			return "api"
		}
		return "address"
	}
	a.handler = connguard.BodyProgress(cfg.BodyTimeout, a.metrics.Instrument(in.Handler(), area))

	// Background work: refusal counts into the log, the retention sweep.
	if cfg.NoSweeps {
		return nil
	}
	cp, err := a.checkpointer(cfg, log)
	if err != nil {
		return err
	}
	bgCtx, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	a.stopBg, a.bgDone, a.bgCount = stopBg, make(chan struct{}, 6), 2
	if cp != nil {
		a.bgCount++
		go func() { cp.run(bgCtx, cfg.CheckpointInterval); a.bgDone <- struct{}{} }()
	}
	go func() { _ = in.RecordRefusals(bgCtx); a.bgDone <- struct{}{} }()
	if a.cluster != nil {
		a.bgCount++
		go func() { a.cluster.reap(bgCtx); a.bgDone <- struct{}{} }()
	}
	go func() {
		_ = a.svc.RunRetention(bgCtx, cfg.RetentionSweep, cfg.InspectorRetention)
		a.bgDone <- struct{}{}
	}()
	a.bgCount++
	go func() { a.runQueue(bgCtx, cfg, log); a.bgDone <- struct{}{} }()
	if cfg.EndpointRetentionSweep > 0 {
		// On several nodes one sweeps at a time (the first live one by
		// name, as the reaper); the decision's expected revision refuses a
		// second node's decision on the same stream state if two overlap.
		var leader func() bool
		if a.cluster != nil {
			leader = a.cluster.leases.Leader
		}
		a.bgCount++
		go func() {
			_ = a.svc.RunEndpointRetention(bgCtx, cfg.EndpointRetentionSweep, leader)
			a.bgDone <- struct{}{}
		}()
	}
	return nil
}

// toConsole sends a browser that opened a console page on the bare domain
// to the same page on the console's own host (302: the console's URL may
// change, a browser should not remember this).
func toConsole(consoleURL string) http.Handler {
	base := strings.TrimSuffix(consoleURL, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.RequestURI()
		if !strings.HasPrefix(target, "/") {
			target = "/"
		}
		http.Redirect(w, r, base+target, http.StatusFound)
	})
}

// Handler serves everything on one port: public addresses by host, the
// API, console, metrics and health routes on the bare domain.
func (a *App) Handler() http.Handler { return a.handler }

// StopStreams ends the open smee streams, which would otherwise keep an
// http.Server's Shutdown waiting (register it with RegisterOnShutdown).
func (a *App) StopStreams() {
	if a.stopStreams != nil {
		a.stopStreams()
	}
}

// Service is the commands service (for one-shot commands and tests).
func (a *App) Service() *commands.Service { return a.svc }

// Views are the read models.
func (a *App) Views() *projections.Runner { return a.views }

// Store is the event log.
func (a *App) Store() domain.EventStore { return a.store }

// Codec encodes the log's events.
func (a *App) Codec() *domain.Codec { return a.codec }

// Hub holds the agent sessions.
func (a *App) Hub() *tunnel.Hub { return a.hub }

// Recorder is the one writer of the log.
func (a *App) Recorder() *record.Recorder { return a.rec }

// DiskReserve is the relay's reserve of free disk; nil when it has none.
func (a *App) DiskReserve() *diskreserve.Reserve { return a.disk }

// Node is this node's name.
func (a *App) Node() string { return a.node }

// Metrics are the relay's metrics (the listener counts refusals into them).
func (a *App) Metrics() *metrics.Metrics { return a.metrics }

// closeSocketsWait bounds how long Close waits for the API's sockets to
// end after their close frames (each within a second of its frame).
const closeSocketsWait = 5 * time.Second

// Close stops the background work, ends the agent sessions (forwards
// still open answer 503), closes the API's WebSockets with 1001, stops
// the views and closes the log and the lock.
// Call it after the http.Server has drained.
func (a *App) Close() error {
	if a.stopBg != nil {
		a.stopBg()
		for range a.bgCount {
			<-a.bgDone
		}
	}
	if a.closeHub {
		a.hub.Close()
	}
	// The API's sockets (hijacked: http.Server.Shutdown leaves them) are
	// told the relay goes away, 1001, once the hub has ended the agents'
	// sessions as the relay's shutdown: a forward in flight is recorded
	// as ended by it, not by its agent's socket closing.
	if a.sockets != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeSocketsWait)
		_ = a.sockets.Stop(ctx) // past the wait, the process's exit ends them
		cancel()
	}
	if a.cluster != nil {
		a.cluster.close()
	}
	a.stopRun()
	runErr := <-a.runDone
	if errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	return errors.Join(runErr, a.views.Close(), a.store.Close(), a.lock.Release())
}
