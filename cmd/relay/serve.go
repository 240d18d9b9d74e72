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

	"github.com/99designs/gqlgen/graphql/playground"
	"github.com/spf13/cobra"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/console"
	"github.com/relayhq/relay/console/graphiql"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/esdb"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/metrics"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/tunnel"
)

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

// app is the opened core: the log, the views and their runner.
type app struct {
	store domain.EventStore
	views *projections.Views
	codec *domain.Codec
	done  chan error
	stop  context.CancelFunc
}

// openApp opens the event log and the views under dir and starts feeding
// the views; they have caught up with the log when it returns.
func openApp(ctx context.Context, dir, eventstoreURL string, log *slog.Logger) (*app, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	store, err := openStore(ctx, dir, eventstoreURL, log)
	if err != nil {
		return nil, err
	}
	codec := domain.NewCodec()
	views, err := projections.Open(ctx, filepath.Join(dir, "views.db"), store, projections.Options{Logger: log, Codec: codec})
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("open views: %w", err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	a := &app{store: store, views: views, codec: codec, done: make(chan error, 1), stop: stop}
	go func() { a.done <- views.Run(runCtx) }()
	last, err := store.LastPosition(ctx)
	if err == nil {
		err = views.WaitFor(ctx, last)
	}
	if err != nil {
		a.close()
		return nil, fmt.Errorf("catch up views: %w", err)
	}
	return a, nil
}

// openStore opens the event log: EventStoreDB when a URL is given, else the
// embedded SQLite log under dir.
func openStore(ctx context.Context, dir, eventstoreURL string, log *slog.Logger) (domain.EventStore, error) {
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
	return errors.Join(runErr, a.views.Close(), a.store.Close())
}

func serve(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) error {
	if os.Getenv("GOGC") == "" {
		// The heap is small (bodies live in SQLite, not in memory), so a
		// higher GC target costs a few MiB and saves CPU on every request.
		debug.SetGCPercent(400)
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
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	a, err := openApp(ctx, cfg.Data, cfg.EventStore, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() {
		if err := a.close(); err != nil {
			log.Error("close", "err", err)
		}
	}()

	bus, err := tunnel.NewBus(log)
	if err != nil {
		return fmt.Errorf("start bus: %w", err)
	}
	hub := tunnel.NewHub(tunnel.HubConfig{Store: a.store, Codec: a.codec, Logger: log, Now: time.Now, NewID: commands.NewEventID}, bus)
	busCtx, stopBus := context.WithCancel(context.WithoutCancel(ctx))
	busDone := make(chan error, 1)
	go func() { busDone <- bus.Run(busCtx) }()
	defer func() {
		stopBus()
		<-busDone
		bus.Close()
	}()
	if err := closeStaleAgents(ctx, a.views, hub); err != nil {
		return err
	}
	client := tunnel.NewClient(bus)

	port := cfg.PublicPort
	if port == 0 {
		port = ln.Addr().(*net.TCPAddr).Port
	}
	urls := publicURLs{domain: cfg.Domain, port: port}
	svc := commands.New(commands.Config{InspectorTTL: cfg.InspectorTTL, ForwardTimeout: cfg.ForwardTimeout, SignupOpen: cfg.Signup},
		a.store, a.codec, a.views, client, hub, log)
	gql := graph.NewHandler(&graph.Resolver{
		Service: svc, Views: a.views, Log: a.store, Hub: hub, PublicURL: urls.address, Logger: log, AdminToken: cfg.AdminToken,
	}, graph.ServerOptions{KeepAlive: cfg.KeepAlive, Playground: playground.Handler("relay GraphQL", "/graphql", graphiql.PlaygroundOptions("/assets/graphiql/")...)})

	met := metrics.New()
	met.Positions(a.store.LastPosition, a.views.Position)
	bare := http.NewServeMux()
	bare.Handle("/metrics", met.Handler())
	bare.Handle("/graphql", gql)
	bare.Handle("/assets/graphiql/", graphiql.AssetsHandler())
	bare.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	bare.Handle("/", console.Handler())

	in := ingress.New(ingress.Config{
		Domain: cfg.Domain, CaptureCap: int64(cfg.CaptureCap), MaxBody: int64(cfg.MaxBody),
		ForwardTimeout: cfg.ForwardTimeout, Logger: log,
	}, ingress.Deps{
		Store: a.store, Codec: a.codec, Resolver: addressResolver{a.views}, Forwarder: client, Bare: bare,
		Now: time.Now, NewID: commands.NewEventID, NewDeliveryID: commands.NewDeliveryID,
	})
	// DisableGeneralOptionsHandler: "OPTIONS *" is a delivery like any other.
	area := func(r *http.Request) string {
		if _, isBare, _ := ingress.ParseHost(r.Host, cfg.Domain); isBare {
			return "api"
		}
		return "address"
	}
	srv := &http.Server{Handler: met.Instrument(in.Handler(), area), DisableGeneralOptionsHandler: true, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	// Targets net/http would refuse for their percent-encoding ("/%zz") are
	// deliveries too: see ingress.TolerateTargets.
	tolerant := ingress.TolerateTargets(srv, ln)
	served := make(chan error, 1)
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
func closeStaleAgents(ctx context.Context, views *projections.Views, hub *tunnel.Hub) error {
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
type addressResolver struct{ views *projections.Views }

func (r addressResolver) Resolve(ctx context.Context, id string) (ingress.Route, error) {
	a, err := r.views.Address(ctx, id)
	if err != nil {
		return ingress.Route{}, err
	}
	return ingress.Route{
		ID: a.ID, Kind: a.Kind, AccountID: a.AccountID, Mode: a.Mode, ResponseCapture: a.ResponseCapture,
		Deleted: a.Deleted, Expired: a.Expired, LastActivityAt: a.LastActivityAt, ExpiresAt: a.ExpiresAt,
	}, nil
}
