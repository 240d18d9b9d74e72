package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/internal/termtext"
)

const maxReplayConcurrency = 64

// replayJSON is one line of `relay replay -o json`.
type replayJSON struct {
	DeliveryID string  `json:"deliveryId"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	Status     *int    `json:"status"`  // the target's answer; null when none
	Error      *string `json:"error"`   // why the request got no answer
	Skipped    *string `json:"skipped"` // why it was not sent
}

// replayTarget is where --to sends: the authority for the Host header,
// the address to dial, and a path put before every recorded target.
type replayTarget struct {
	host, addr, serverName, prefix string
	tls, insecure                  bool
}

func parseReplayTarget(s string) (replayTarget, error) {
	bad := func(why string) error {
		return cmdutil.Usage(fmt.Errorf("--to %q: %s; give the URL of the server to send to, such as http://localhost:3000", s, why))
	}
	if s == "" {
		return replayTarget{}, cmdutil.Usage(errors.New("--to is required: the URL of the server to send to, such as http://localhost:3000"))
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return replayTarget{}, bad("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return replayTarget{}, bad("the scheme must be http or https")
	case u.Host == "" || u.Hostname() == "":
		return replayTarget{}, bad("no host")
	case u.User != nil, u.RawQuery != "", u.Fragment != "", u.Opaque != "":
		return replayTarget{}, bad("only a scheme, a host, a port and a path prefix may be given")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return replayTarget{host: u.Host, addr: net.JoinHostPort(u.Hostname(), port), serverName: u.Hostname(),
		prefix: strings.TrimRight(u.EscapedPath(), "/"), tls: u.Scheme == "https"}, nil
}

func replayCommand(stdout io.Writer) *cobra.Command {
	var out cmdutil.Output
	var to string
	var only []string
	var concurrency int
	var delay, timeout time.Duration
	var insecure bool
	cmd := &cobra.Command{
		Use:   "replay BUNDLE --to URL",
		Short: "Send the requests of a replay bundle again, byte for byte, to a server",
		Long: `Send the requests of a replay bundle (relay deliveries export --format bundle)
to the server at --to, in recorded order, without a relay: the method, the
raw path and query, every header in order with repeats, and the body, as the
sender sent them. The Host header names --to's host. Each request goes over a
connection of its own; a line per request says what the server answered.

Nothing is sent when a line of the bundle is malformed. Deliveries stored in
part are skipped and said so. Exits 1 when a request got no answer (the
server refused the cmdutil.Connection, closed it, or timed out).`,
		Example: `  relay replay stripe.bundle --to http://localhost:3000
  relay replay stripe.bundle --to http://localhost:3000/api --only 01a208a2-... --only 01a208a3-...
  relay replay stripe.bundle --to https://staging.example.com --concurrency 4 --delay 100ms`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			target, err := parseReplayTarget(to)
			if err != nil {
				return err
			}
			target.insecure = insecure
			if concurrency < 1 || concurrency > maxReplayConcurrency {
				return cmdutil.Usage(fmt.Errorf("--concurrency %d: want 1 to %d", concurrency, maxReplayConcurrency))
			}
			if delay < 0 || timeout <= 0 {
				return cmdutil.Usage(errors.New("--delay must not be negative and --timeout must be positive"))
			}
			r := replayer{target: target, timeout: timeout, delay: delay, concurrency: concurrency, json: out.JSON(), stdout: stdout}
			return r.run(c.Context(), args[0], only)
		},
	}
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&to, "to", "", "the server to send to: http(s)://host[:port][/prefix]")
	cmd.Flags().StringArrayVar(&only, "only", nil, "send only this delivery id (repeatable)")
	cmd.Flags().IntVar(&concurrency, "concurrency", 1, "requests in flight at once (lines are still printed in recorded order)")
	cmd.Flags().Var(duration.NewFlag(&delay, 0), "delay", "wait this long before each request after the first")
	cmd.Flags().Var(duration.NewFlag(&timeout, 30*time.Second), "timeout", "bound on each request: connect, send, and the answer's headers")
	cmd.Flags().BoolVar(&insecure, "insecure", false, "with an https --to: accept any certificate (a local server's self-signed one)")
	return cmd
}

type replayer struct {
	target      replayTarget
	timeout     time.Duration
	delay       time.Duration
	concurrency int
	json        bool
	stdout      io.Writer
}

// run checks the whole bundle first, so a malformed line stops the replay
// before anything is sent, then sends in a second pass. Both passes read
// one line at a time.
func (p replayer) run(ctx context.Context, path string, only []string) error {
	wanted := map[string]bool{}
	for _, id := range only {
		wanted[id] = true
	}
	selected := func(r bundleRequest) bool { return len(wanted) == 0 || wanted[r.ID] }
	found := map[string]bool{}
	if err := eachBundleRequest(path, func(r bundleRequest) error {
		if wanted[r.ID] {
			found[r.ID] = true
		}
		return nil
	}); err != nil {
		return err
	}
	for _, id := range only {
		if !found[id] {
			return cmdutil.Usage(fmt.Errorf("--only %s: no such delivery in %s", id, path))
		}
	}

	// Requests run concurrently, their results are printed in order: each
	// gets a channel, queued in bundle order; the queue's bound and the
	// semaphore bound what is in flight.
	type pending struct {
		req    bundleRequest
		result chan replayJSON
	}
	queue := make(chan pending, p.concurrency)
	slots := make(chan struct{}, p.concurrency)
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
	err := eachBundleRequest(path, func(r bundleRequest) error {
		if !selected(r) {
			return nil
		}
		pd := pending{req: r, result: make(chan replayJSON, 1)}
		if why := r.skipReason(); why != "" {
			pd.result <- replayResult(r, 0, nil, why)
			queue <- pd
			return nil
		}
		if !first && p.delay > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(p.delay):
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case slots <- struct{}{}:
		}
		queue <- pd
		go func() {
			defer func() { <-slots }()
			status, err := p.send(ctx, r)
			pd.result <- replayResult(r, status, err, "")
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
	if !p.json {
		fmt.Fprintf(p.stdout, "%d sent, %d skipped, %d without an answer\n", sent, skipped, failed)
	}
	if failed > 0 {
		return fmt.Errorf("replay: %d of %d requests got no answer from %s; the first: %s", failed, sent+failed, p.target.host, firstFailure)
	}
	return nil
}

func replayResult(r bundleRequest, status int, err error, skipped string) replayJSON {
	res := replayJSON{DeliveryID: r.ID, Method: r.Method, Path: r.Target}
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
func (p replayer) print(res replayJSON) error {
	if p.json {
		return cmdutil.WriteJSONLine(p.stdout, res)
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
	_, err := fmt.Fprintf(p.stdout, "%s  delivery %s\n", line, res.DeliveryID)
	return err
}

// eachBundleRequest opens the bundle at path and hands fn each request in
// order. A line that cannot be read is a usage error naming it.
func eachBundleRequest(path string, fn func(bundleRequest) error) error {
	f, err := os.Open(path)
	if err != nil {
		return cmdutil.Usage(fmt.Errorf("replay: %w", err))
	}
	defer f.Close()
	br, err := newBundleReader(f)
	if err != nil {
		return bundleError(path, err)
	}
	for {
		r, err := br.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return bundleError(path, err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

func bundleError(path string, err error) error {
	var le *bundleLineError
	if errors.As(err, &le) {
		return cmdutil.Usage(fmt.Errorf("replay: %s: %w (nothing was sent)", path, err))
	}
	return fmt.Errorf("replay: %s: %w", path, err)
}

// send writes r on a connection of its own and reads the status of the
// answer. The request is written by hand, not by net/http's client, which
// would sort the headers, add User-Agent and Accept-Encoding, compute
// Content-Length itself, and write the target again from a parsed URL:
// replay sends the recorded bytes and nothing else (writeRequest).
func (p replayer) send(ctx context.Context, r bundleRequest) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	d := net.Dialer{}
	conn, err := d.DialContext(ctx, "tcp", p.target.addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	// The deadline bounds every read and write; closing on ctx's end also
	// ends one blocked in the TLS handshake.
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if p.target.tls {
		tc := tls.Client(conn, &tls.Config{ServerName: p.target.serverName, InsecureSkipVerify: p.target.insecure, NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			return 0, fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	if err := r.writeRequest(conn, p.target.host, p.target.prefix); err != nil {
		return 0, fmt.Errorf("send: %w", err)
	}
	rd := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(rd, &http.Request{Method: r.Method})
		if err != nil {
			return 0, fmt.Errorf("read the answer: %w", err)
		}
		// 100 Continue and other interim answers precede the real one.
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		// Read some of the body, so a server still writing it is not
		// reset by the close; the status is what is reported.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
}
