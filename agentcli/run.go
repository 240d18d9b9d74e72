package agentcli

import (
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// agent is a running Serve.
type agent struct {
	opts   Options
	wsURL  string
	routes []route
	obs    Observer
	tls    *tls.Config // the relay's roots: the system's, plus Options.CAFile's

	fwdMu sync.Mutex
	fwds  map[Target]*forwarder // one connection pool per local target

	pingInterval time.Duration // how often the agent pings the server
	readTimeout  time.Duration // silence after which the socket is dead
	writeTimeout time.Duration
	backoffBase  time.Duration
	backoffCap   time.Duration

	// inFlight bounds the bytes of the requests the agent holds while
	// their forwards run (inFlightBytes).
	inFlight *semaphore.Weighted
}

func newAgent(o Options) (*agent, error) {
	ws, routes, err := o.validate()
	if err != nil {
		return nil, &OptionsError{err: err}
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	tlsConfig, err := TLSConfig(o.CAFile)
	if err != nil {
		return nil, &OptionsError{err: err}
	}
	obs := o.Observer
	if obs == nil {
		obs = discard{}
	}
	return &agent{
		opts:         o,
		wsURL:        ws,
		routes:       routes,
		obs:          obs,
		tls:          tlsConfig,
		fwds:         map[Target]*forwarder{},
		pingInterval: 3 * time.Second,
		readTimeout:  10 * time.Second, // about three missed pongs
		writeTimeout: 10 * time.Second,
		backoffBase:  500 * time.Millisecond,
		backoffCap:   10 * time.Second,
		inFlight:     semaphore.NewWeighted(inFlightBytes),
	}, nil
}

// forwarder returns the forwarder of a local target.
func (a *agent) forwarder(t Target) *forwarder {
	a.fwdMu.Lock()
	defer a.fwdMu.Unlock()
	f, ok := a.fwds[t]
	if !ok {
		f = newForwarder(t, a.opts.Timeout, a.opts.Insecure)
		f.preserveHost = a.opts.HostHeader == HostPreserve
		a.fwds[t] = f
	}
	return f
}

func (a *agent) closeForwarders() {
	a.fwdMu.Lock()
	defer a.fwdMu.Unlock()
	for _, f := range a.fwds {
		f.close()
	}
}

// run keeps a session open, reconnecting after every drop: the one
// reconnect logic of every agent (relay agent, relay listen, the desktop).
func (a *agent) run(ctx context.Context) error {
	defer a.closeForwarders()
	a.obs.State(StateEvent{State: Connecting, Server: a.wsURL})
	failures := 0
	for {
		started := time.Now()
		acked, err := a.serve(ctx)
		if ctx.Err() != nil {
			a.obs.State(StateEvent{State: Stopped, Server: a.wsURL})
			return nil
		}
		// A session that stood for a while resets the backoff; a server
		// that accepts and drops at once is still backed off from.
		if acked && time.Since(started) >= a.backoffCap {
			failures = 0
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			reason := "refused by " + a.opts.Server + ": " + refused.Error()
			a.obs.State(StateEvent{State: Refused, Server: a.wsURL, Reason: reason})
			return &RefusedError{reason: reason}
		}
		delay := a.backoff(failures)
		var held *heldOffError
		if errors.As(err, &held) {
			delay = a.heldOffDelay(held, failures)
		}
		failures++
		a.obs.State(StateEvent{State: Reconnecting, Server: a.wsURL, Reason: err.Error(), NextTry: time.Now().Add(delay), HeldOff: held != nil})
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			a.obs.State(StateEvent{State: Stopped, Server: a.wsURL})
			return nil
		case <-t.C:
		}
	}
}

// backoff is exponential with jitter: a random delay in [d/2, d), where d
// doubles with each failure up to the cap.
func (a *agent) backoff(failures int) time.Duration {
	return jittered(a.backoffBase, a.backoffCap, failures)
}

// A session refused for being one too many waits from heldOffBase,
// doubling up to heldOffCap (jittered as backoff is): its place frees only
// when another listener ends, and every try costs the relay a connection,
// an Endpoint query and one of the account's session starts (60 a
// minute). At the cap a refused agent tries about once a minute, so even
// dozens of them leave the account's rate to its working listeners.
const (
	heldOffBase = 10 * time.Second
	heldOffCap  = time.Minute
)

// heldOffDelay is the wait after the relay refused a session for now: for
// TOO_MANY_SESSIONS the long backoff above; for RATE_LIMITED at least the
// relay's retryAfter, plus up to a quarter more so that agents refused
// together do not come back together.
func (a *agent) heldOffDelay(e *heldOffError, failures int) time.Duration {
	if e.full {
		return jittered(heldOffBase, heldOffCap, failures)
	}
	return max(a.backoff(failures), e.retryAfter+rand.N(e.retryAfter/4+1))
}

// jittered is a random delay in [d/2, d), where d is base doubled with
// each failure up to limit.
func jittered(base, limit time.Duration, failures int) time.Duration {
	d := base
	for i := 0; i < failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return d/2 + rand.N(d/2+1)
}
