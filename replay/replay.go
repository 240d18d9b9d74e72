// Package replay sends the requests of a replay bundle (package bundle)
// again, byte for byte, to a server, without a relay: `relay replay`.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/relayhq/relay/bundle"
	"github.com/relayhq/relay/internal/termtext"
)

// MaxConcurrency is the most requests --concurrency lets be in flight.
const MaxConcurrency = 64

// DefaultInFlightBytes bounds what the requests being sent hold together
// (bundle.Request.Size) when Replayer.InFlightBytes is 0. A request holds
// its decoded body until its answer comes, and a bundle line may be
// bundle.MaxLine long, so --concurrency alone would let a bundle of 64
// such lines hold about 1.5 GiB: with the budget, small requests go
// --concurrency at once and large ones two or three at a time.
const DefaultInFlightBytes = 64 << 20

// Result is one line of `relay replay -o json`.
type Result struct {
	DeliveryID string  `json:"deliveryId"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	Status     *int    `json:"status"`  // the target's answer; null when none
	Error      *string `json:"error"`   // why the request got no answer
	Skipped    *string `json:"skipped"` // why it was not sent
}

// Target is where --to sends: the authority for the Host header,
// the address to dial, and a path put before every recorded target.
type Target struct {
	host, addr, serverName, prefix string
	tls                            bool
	Insecure                       bool // with https: accept any certificate
}

// ParseTarget reads --to: http(s)://host[:port][/prefix].
func ParseTarget(s string) (Target, error) {
	bad := func(why string) error {
		return inputError(fmt.Errorf("--to %q: %s; give the URL of the server to send to, such as http://localhost:3000", s, why))
	}
	if s == "" {
		return Target{}, inputError(errors.New("--to is required: the URL of the server to send to, such as http://localhost:3000"))
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return Target{}, bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return Target{}, bad("the scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return Target{}, bad("no host")
	case u.User != nil, u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return Target{}, bad("only a scheme, a host, a port and a path prefix may be given")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return Target{host: u.Host, addr: net.JoinHostPort(u.Hostname(), port), serverName: u.Hostname(),
		prefix: strings.TrimRight(u.EscapedPath(), "/"), tls: u.Scheme == "https"}, nil
}

// Replayer sends a bundle's requests to Target and prints a line for each
// on Stdout (JSON lines with JSON).
type Replayer struct {
	Target      Target
	Timeout     time.Duration
	Delay       time.Duration
	Concurrency int
	JSON        bool
	Stdout      io.Writer
	// InFlightBytes bounds the bytes of the requests being sent at once
	// (DefaultInFlightBytes when 0); a request larger than the whole
	// budget is sent alone.
	InFlightBytes int64

	onBudgetWait func() // for tests: the replay waits for the budget
}

// Run checks the whole bundle first, so a malformed line stops the replay
// before anything is sent, then sends in a second pass. Both passes read
// one line at a time.
func (p Replayer) Run(ctx context.Context, path string, only []string) error {
	wanted := map[string]bool{}
	for _, id := range only {
		wanted[id] = true
	}
	selected := func(r bundle.Request) bool { return len(wanted) == 0 || wanted[r.ID] }
	found := map[string]bool{}
	if err := eachBundleRequest(path, func(r bundle.Request) error {
		if wanted[r.ID] {
			found[r.ID] = true
		}
		return nil
	}); err != nil {
		return err
	}
	for _, id := range only {
		if !found[id] {
			return inputError(fmt.Errorf("--only %s: no such delivery in %s", id, path))
		}
	}

	// Requests run concurrently, their results are printed in order: each
	// gets a channel, queued in bundle order; the queue's bound and slots
	// bound the requests in flight, and inFlight their bytes. A request
	// waiting to be printed holds its result only, not its body.
	type pending struct {
		result chan Result
	}
	queue := make(chan pending, p.Concurrency)
	slots := make(chan struct{}, p.Concurrency)
	budget := p.InFlightBytes
	if budget <= 0 {
		budget = DefaultInFlightBytes
	}
	inFlight := semaphore.NewWeighted(budget)
	var sent, skipped, failed int
	var firstFailure string
	printed := make(chan error, 1)
	go func() {
		var err error
		for pd := range queue {
			res := <-pd.result
			switch {
			case res.Skipped != nil:
				skipped++
			case res.Error != nil:
				failed++
				if firstFailure == "" {
					firstFailure = fmt.Sprintf("%s %s (delivery %s): %s", res.Method, termtext.Safe(res.Path, false), res.DeliveryID, *res.Error)
				}
			default:
				sent++
			}
			if err == nil {
				err = p.print(res)
			}
		}
		printed <- err
	}()
	first := true
	err := eachBundleRequest(path, func(r bundle.Request) error {
		if !selected(r) {
			return nil
		}
		pd := pending{result: make(chan Result, 1)}
		if why := r.SkipReason(); why != "" {
			pd.result <- result(r, 0, nil, why)
			queue <- pd
			return nil
		}
		if !first && p.Delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(p.Delay):
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case slots <- struct{}{}:
		}
		// Only this goroutine acquires, so requests still start in
		// recorded order: a large one waits until those before it leave
		// room, and the ones after it wait behind it.
		n := min(r.Size(), budget)
		if !inFlight.TryAcquire(n) {
			if p.onBudgetWait != nil {
				p.onBudgetWait()
			}
			if err := inFlight.Acquire(ctx, n); err != nil {
				return fmt.Errorf("replay: %w", err)
			}
		}
		queue <- pd
		go func() {
			defer func() { <-slots }()
			defer inFlight.Release(n)
			status, err := p.send(ctx, r)
			pd.result <- result(r, status, err, "")
		}()
		return nil
	})
	close(queue)
	if perr := <-printed; err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if !p.JSON {
		fmt.Fprintf(p.Stdout, "%d sent, %d skipped, %d without an answer\n", sent, skipped, failed)
	}
	if failed > 0 {
		return fmt.Errorf("replay: %d of %d requests got no answer from %s; the first: %s", failed, sent+failed, p.Target.host, firstFailure)
	}
	return nil
}

func result(r bundle.Request, status int, err error, skipped string) Result {
	res := Result{DeliveryID: r.ID, Method: r.Method, Path: r.Target}
	switch {
	case skipped != "":
		res.Skipped = &skipped
	case err != nil:
		e := err.Error()
		res.Error = &e
	default:
		res.Status = &status
	}
	return res
}

// print writes one result: `POST /webhooks → 200  delivery <id>`.
func (p Replayer) print(res Result) error {
	if p.JSON {
		enc := json.NewEncoder(p.Stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	// The sender's bytes are escaped where they could drive the terminal.
	line := res.Method + " " + termtext.Safe(res.Path, false)
	switch {
	case res.Skipped != nil:
		line += "  skipped: " + *res.Skipped
	case res.Error != nil:
		line += " → no answer: " + *res.Error
	default:
		line += fmt.Sprintf(" → %d", *res.Status)
	}
	_, err := fmt.Fprintf(p.Stdout, "%s  delivery %s\n", line, res.DeliveryID)
	return err
}

// inputError is a bundle or a --to replay cannot act on: a usage error
// (exit 2), as the command line's.
func inputError(err error) error { return &InputError{Err: err} }

// InputError is what replay refuses before sending: its exit code is 2.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ExitCode is the command line's code for a usage error.
func (e *InputError) ExitCode() int { return 2 }
