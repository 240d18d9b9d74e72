package agentcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Run is `relay agent`: it serves the Endpoint until ctx is cancelled and
// then returns nil. Network failures and server restarts are reported on
// stderr and retried with backoff; invalid flags return an error, and a
// refusal that retrying cannot change (bad token, unknown Endpoint) returns
// a *RefusedError (ExitCode 2).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr, os.LookupEnv)
	if err != nil {
		return err
	}
	return newAgent(cfg, stdout, stderr).run(ctx)
}

// agent is a running `relay agent`.
type agent struct {
	cfg    config
	fwd    *forwarder
	stdout *syncWriter // one line per forwarded request
	stderr *syncWriter // connection state

	pingInterval time.Duration // how often the agent pings the server
	readTimeout  time.Duration // silence after which the socket is dead
	writeTimeout time.Duration
	backoffBase  time.Duration
	backoffCap   time.Duration
}

func newAgent(cfg config, stdout, stderr io.Writer) *agent {
	fwd := newForwarder(cfg.target, cfg.timeout)
	fwd.preserveHost = cfg.hostHeader == hostPreserve
	return &agent{
		cfg:          cfg,
		fwd:          fwd,
		stdout:       &syncWriter{w: stdout},
		stderr:       &syncWriter{w: stderr},
		pingInterval: 3 * time.Second,
		readTimeout:  10 * time.Second, // about three missed pongs
		writeTimeout: 10 * time.Second,
		backoffBase:  500 * time.Millisecond,
		backoffCap:   10 * time.Second,
	}
}

// run keeps a session open, reconnecting after every drop.
func (a *agent) run(ctx context.Context) error {
	defer a.fwd.close()
	failures := 0
	for {
		started := time.Now()
		acked, err := a.serve(ctx)
		if ctx.Err() != nil {
			a.stderr.printf("agent stopped\n")
			return nil
		}
		// A session that stood for a while resets the backoff; a server
		// that accepts and drops at once is still backed off from.
		if acked && time.Since(started) >= a.backoffCap {
			failures = 0
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			return &RefusedError{reason: fmt.Sprintf("refused by %s: %v", a.cfg.server, refused)}
		}
		delay := a.backoff(failures)
		failures++
		a.stderr.printf("disconnected: %v; reconnecting in %s\n", err, delay.Round(100*time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			a.stderr.printf("agent stopped\n")
			return nil
		case <-t.C:
		}
	}
}

// backoff is exponential with jitter: a random delay in [d/2, d), where d
// doubles with each failure up to the cap.
func (a *agent) backoff(failures int) time.Duration {
	d := a.backoffBase
	for i := 0; i < failures && d < a.backoffCap; i++ {
		d *= 2
	}
	d = min(d, a.backoffCap)
	return d/2 + rand.N(d/2+1)
}

// syncWriter serializes lines written by concurrent goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, format, args...)
}
