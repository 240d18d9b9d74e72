package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/connguard"
)

// headerTimeout bounds the request line and headers of each request,
// counted from the first byte the server waits for (a new connection or the
// next request on a kept-alive one).
const headerTimeout = 30 * time.Second

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
	lock, err := app.LockData(cfg.Data)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		lock.Release()
		return fmt.Errorf("listen: %w", err)
	}
	port := cfg.PublicPort
	if port == 0 {
		port = ln.Addr().(*net.TCPAddr).Port
	}
	urls := publicURLs{domain: cfg.Domain, port: port}
	a, err := app.New(ctx, cfg.appConfig(lock, urls.address, log))
	if err != nil {
		ln.Close()
		return err
	}
	defer func() { // after the drain below: attempts still open answer 503
		if err := a.Close(); err != nil {
			log.Error("close", "err", err)
		}
	}()

	// DisableGeneralOptionsHandler: "OPTIONS *" is a delivery like any other.
	srv := &http.Server{
		Handler:                      a.Handler(),
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

	// Targets net/http would refuse for their percent-encoding ("/%zz") are
	// deliveries too: see ingress.TolerateTargets.
	served := make(chan error, 1)
	guarded := connguard.NewListener(ln, cfg.MaxConnsPerIP, cfg.BodyTimeout)
	guarded.OnRefuse = a.Metrics().ConnectionRefused
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
