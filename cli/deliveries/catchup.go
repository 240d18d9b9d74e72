package deliveries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/relayhq/relay/agentcli"
	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
)

// catchUpOptions bound a catch-up: how many retries run at once, how many
// start per second, and how many deliveries it takes on.
type catchUpOptions struct {
	concurrency int
	perSecond   float64
	limit       int
}

func (o catchUpOptions) check() error {
	switch {
	case o.concurrency < 1 || o.concurrency > 16:
		return cmdutil.Usage(errors.New("--concurrency must be 1 to 16"))
	case o.perSecond <= 0 || o.perSecond > 100:
		return cmdutil.Usage(errors.New("--rate must be above 0 and at most 100 per second"))
	case o.limit < 1 || o.limit > 10000:
		return cmdutil.Usage(errors.New("--limit must be 1 to 10000"))
	}
	return nil
}

// defaultCatchUp is what relay listen --catch-up uses.
var defaultCatchUp = catchUpOptions{concurrency: 2, perSecond: 5, limit: 1000}

// errCatchUpFailed is a catch-up in which some retry was not answered 2xx
// (exit 1).
var errCatchUpFailed = errors.New("catch-up: some deliveries were not answered 2xx; they stay refused-offline only if no agent took them")

// catchUp retries the deliveries of an Endpoint that were refused while no
// agent was connected, oldest first, each as a normal attempt, within the
// options' bounds, printing a line per delivery. A delivery a retry
// reached the local target with no longer matches, so interrupting it and
// running it again sends only what is left.
func catchUp(ctx context.Context, client *apiclient.Client, ref string, o catchUpOptions, w io.Writer) error {
	rows, more, err := listDeliveries(ctx, client, ref, o.limit, map[string]any{"refusedOffline": true})
	if err != nil {
		return fmt.Errorf("catch-up: %w", err)
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "nothing to catch up: no delivery of %s was refused while no agent was connected\n", ref)
		return nil
	}
	slices.Reverse(rows) // oldest first
	fmt.Fprintf(w, "catching up %s of %s refused while no agent was connected, oldest first (%d at once, %g per second)\n",
		domain.Counted(len(rows), "delivery", "deliveries"), ref, o.concurrency, o.perSecond)
	var (
		lim          = rate.NewLimiter(rate.Limit(o.perSecond), 1)
		next, done   atomic.Int64
		ok, failed   atomic.Int64
		mu           sync.Mutex
		stop         error
		wg           sync.WaitGroup
		stopCtx, end = context.WithCancel(ctx)
	)
	defer end()
	const q = `mutation($id: ID!){ retryDelivery(id: $id){ responseStatus } }`
	for range o.concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(rows) || lim.Wait(stopCtx) != nil {
					return
				}
				d := rows[i]
				var res struct{ RetryDelivery struct{ ResponseStatus *int } }
				err := client.Do(stopCtx, q, map[string]any{"id": d.ID}, &res)
				n := done.Add(1)
				mu.Lock()
				switch {
				case err != nil && stopCtx.Err() != nil:
				case err != nil:
					var refused *apiclient.Error
					if errors.As(err, &refused) && refused.Refusal() {
						// No agent, or a bad token: every other retry would
						// be refused too.
						if stop == nil {
							stop = fmt.Errorf("catch-up stopped: %w", err)
						}
						end()
					}
					failed.Add(1)
					fmt.Fprintf(w, "%d/%d %s %s → %v\n", n, len(rows), d.Method, d.Path, err)
				default:
					st := res.RetryDelivery.ResponseStatus
					if st != nil && *st >= 200 && *st < 300 {
						ok.Add(1)
					} else {
						failed.Add(1)
					}
					fmt.Fprintf(w, "%d/%d %s %s → %s  delivery %s\n", n, len(rows), d.Method, d.Path, statusText(st), d.ID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if stop != nil {
		return stop
	}
	if ctx.Err() != nil {
		fmt.Fprintf(w, "interrupted after %d of %d; run it again to send the rest (what reached the local target is not sent again)\n", ok.Load()+failed.Load(), len(rows))
		return nil
	}
	fmt.Fprintf(w, "caught up: %d answered 2xx, %d not", ok.Load(), failed.Load())
	if more {
		fmt.Fprint(w, "; more are left beyond the search (run it again)")
	}
	fmt.Fprintln(w)
	if failed.Load() > 0 {
		return errCatchUpFailed
	}
	return nil
}

// catchUpObserver is listen's observer that, once the agent is first
// connected (listen asks for roles, so the agent says so once the relay
// has attached every session: a retry then finds it), catches up each
// Endpoint (with --catch-up) or says how many deliveries were refused
// while it was away.
type catchUpObserver struct {
	agentcli.Observer
	ctx    context.Context
	client *apiclient.Client
	eps    []string // names
	run    bool     // --catch-up
	out    io.Writer
	once   sync.Once
}

// NewCatchUpObserver wraps o for listen on the Endpoints named eps; run
// is --catch-up.
func NewCatchUpObserver(ctx context.Context, o agentcli.Observer, client *apiclient.Client, eps []string, run bool, out io.Writer) agentcli.Observer {
	return &catchUpObserver{Observer: o, ctx: ctx, client: client, eps: eps, run: run, out: out}
}

// Role passes the agent's role on to the observer it wraps, if it hears it.
func (o *catchUpObserver) Role(e agentcli.RoleEvent) {
	if r, ok := o.Observer.(agentcli.RoleObserver); ok {
		r.Role(e)
	}
}

func (o *catchUpObserver) State(e agentcli.StateEvent) {
	o.Observer.State(e)
	if e.State != agentcli.Connected {
		return
	}
	o.once.Do(func() { go o.offer() })
}

func (o *catchUpObserver) offer() {
	for _, ep := range o.eps {
		if o.run {
			if err := catchUp(o.ctx, o.client, ep, defaultCatchUp, o.out); err != nil && o.ctx.Err() == nil {
				fmt.Fprintln(o.out, err)
			}
			continue
		}
		rows, more, err := listDeliveries(o.ctx, o.client, ep, 100, map[string]any{"refusedOffline": true})
		if err != nil || len(rows) == 0 {
			continue
		}
		n := fmt.Sprint(len(rows))
		if more || len(rows) == 100 {
			n += " or more"
		}
		fmt.Fprintf(o.out, "%s deliveries of %s were refused while no agent was connected: relay retry --all --refused-offline %s (or relay listen --catch-up) sends them again\n", n, ep, ep)
	}
}
