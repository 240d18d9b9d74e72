package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/internal/termtext"
)

// queueFlags are the queue policy flags of endpoints create and update
// (docs/queue.md). Each is checked for its form here and for its bounds
// by the relay (INVALID_INPUT, exit 2).
type queueFlags struct {
	maxInFlight, rate, maxAttempts int
	ordering, retryOn              string
	base, cap, maxAge              string
}

func (q *queueFlags) flags(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&q.maxInFlight, "max-in-flight", 0, "QUEUE mode: deliveries sent at once (1-100; default 10)")
	fs.IntVar(&q.rate, "rate", 0, "QUEUE mode: deliveries sent per second (1-1000; default 50)")
	fs.StringVar(&q.ordering, "ordering", "", "QUEUE mode: unordered (default, parallel within --max-in-flight) or strict (one at a time in receipt order)")
	fs.StringVar(&q.retryOn, "retry-on", "", "QUEUE mode: outcomes that count as failed, comma-separated: no-listener, 5xx, timeout, 4xx, or none (default 5xx,timeout)")
	fs.StringVar(&q.base, "backoff-base", "", "QUEUE mode: the first retry's delay (100ms-24h; default 1s), doubled per failure with jitter")
	fs.StringVar(&q.cap, "backoff-cap", "", "QUEUE mode: the longest delay between retries (not below --backoff-base; default 5m)")
	fs.IntVar(&q.maxAttempts, "max-attempts", 0, "QUEUE mode: failed attempts before a delivery is dead (1-100; default 10)")
	fs.StringVar(&q.maxAge, "max-age", "", "QUEUE mode: how long after receipt a delivery may be attempted (1m-30d; default 1d)")
}

// input adds the queue flags set to in["queue"].
func (q *queueFlags) input(cmd *cobra.Command, in map[string]any) error {
	fs := cmd.Flags()
	p := map[string]any{}
	for _, f := range []struct {
		name, field string
		v           int
	}{{"max-in-flight", "maxInFlight", q.maxInFlight}, {"rate", "ratePerSecond", q.rate}, {"max-attempts", "maxAttempts", q.maxAttempts}} {
		if fs.Changed(f.name) {
			p[f.field] = f.v
		}
	}
	if fs.Changed("ordering") {
		o := strings.ToUpper(strings.TrimSpace(q.ordering))
		if o != "STRICT" && o != "UNORDERED" {
			return usage(fmt.Errorf("--ordering %q: want strict or unordered", q.ordering))
		}
		p["ordering"] = o
	}
	if fs.Changed("retry-on") {
		classes, err := domain.ParseRetryOn(q.retryOn)
		if err != nil {
			return usage(fmt.Errorf("--retry-on: %w", err))
		}
		p["retryOn"] = classes
	}
	for _, f := range []struct{ name, field, v string }{{"backoff-base", "backoffBase", q.base}, {"backoff-cap", "backoffCap", q.cap}, {"max-age", "maxAge", q.maxAge}} {
		if !fs.Changed(f.name) {
			continue
		}
		v := strings.TrimSpace(f.v)
		if strings.HasPrefix(v, "-") {
			return usage(fmt.Errorf("--%s %q: must not be negative", f.name, f.v))
		}
		if _, err := duration.Parse(v); err != nil {
			return usage(fmt.Errorf("--%s: %w", f.name, err))
		}
		p[f.field] = v
	}
	if len(p) > 0 {
		in["queue"] = p
	}
	return nil
}

// endpointQueueFields is what endpoint commands read of Endpoint.queue.
const endpointQueueFields = `queue{ queued inFlight dead policy{ maxInFlight ratePerSecond ordering retryOn backoffBase backoffCap maxAttempts maxAge } }`

// endpointQueueJSON is Endpoint.queue.
type endpointQueueJSON struct {
	Queued   int `json:"queued"`
	InFlight int `json:"inFlight"`
	Dead     int `json:"dead"`
	Policy   struct {
		MaxInFlight   int      `json:"maxInFlight"`
		RatePerSecond int      `json:"ratePerSecond"`
		Ordering      string   `json:"ordering"`
		RetryOn       []string `json:"retryOn"`
		BackoffBase   string   `json:"backoffBase"`
		BackoffCap    string   `json:"backoffCap"`
		MaxAttempts   int      `json:"maxAttempts"`
		MaxAge        string   `json:"maxAge"`
	} `json:"policy"`
}

func printEndpointQueue(w io.Writer, q *endpointQueueJSON) {
	if q == nil {
		return
	}
	p := q.Policy
	retry := strings.Join(p.RetryOn, ",")
	if retry == "" {
		retry = "nothing"
	}
	fmt.Fprintf(w, "queue: %d queued, %d in flight, %d dead; %s, %d in flight, %d/s, retries %s from %s to %s, %d attempts, %s\n",
		q.Queued, q.InFlight, q.Dead, strings.ToLower(p.Ordering), p.MaxInFlight, p.RatePerSecond, retry, p.BackoffBase, p.BackoffCap, p.MaxAttempts, p.MaxAge)
}

// queueStates are the --status values deliveries list reads from the queue.
var queueStates = map[string]bool{"queued": true, "inflight": true, "dead": true}

// queuedJSON is a line of deliveries list --status queued|inflight|dead.
type queuedJSON struct {
	Delivery struct {
		ID         string `json:"id"`
		Method     string `json:"method"`
		Path       string `json:"path"`
		ReceivedAt string `json:"receivedAt"`
	} `json:"delivery"`
	Queue struct {
		State             string  `json:"state"`
		Tries             int     `json:"tries"`
		Failures          int     `json:"failures"`
		NextAt            *string `json:"nextAt"`
		Reason            string  `json:"reason"`
		PossibleDuplicate bool    `json:"possibleDuplicate"`
	} `json:"queue"`
}

// listQueued prints an Endpoint's queue in one state, at most 500 (what one
// operation's cost allows).
func listQueued(ctx context.Context, client *apiclient.Client, endpoint, state string, limit int, out output, stdout io.Writer) error {
	ep, err := findEndpoint(ctx, client, endpoint)
	if err != nil {
		return err
	}
	var res struct{ QueuedDeliveries []queuedJSON }
	const q = `query($ep: ID!, $state: String, $first: Int){ queuedDeliveries(endpoint: $ep, state: $state, first: $first){
		delivery{ id method path receivedAt } queue{ state tries failures nextAt reason possibleDuplicate } } }`
	if err := client.Do(ctx, q, map[string]any{"ep": ep.ID, "state": state, "first": min(limit, 500)}, &res); err != nil {
		return fmt.Errorf("list queue: %w", err)
	}
	if out.json() {
		if res.QueuedDeliveries == nil {
			res.QueuedDeliveries = []queuedJSON{}
		}
		return writeJSON(stdout, res.QueuedDeliveries)
	}
	if len(res.QueuedDeliveries) == 0 {
		fmt.Fprintf(stdout, "no %s deliveries\n", state)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED\tMETHOD\tPATH\tSTATE\tID\tWHY")
	for _, d := range res.QueuedDeliveries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", localTime(d.Delivery.ReceivedAt), d.Delivery.Method, termtext.Safe(d.Delivery.Path, false),
			d.Queue.State, d.Delivery.ID, termtext.Safe(queueWhy(d), false))
	}
	return tw.Flush()
}

// queueWhy says where a queued delivery stands: "attempt 3 failed 503,
// next at 12:04:10", "dead after 8 attempts: …".
func queueWhy(d queuedJSON) string {
	q := d.Queue
	var s string
	switch {
	case q.State == "dead":
		s = q.Reason
	case q.State == "inflight":
		s = fmt.Sprintf("attempt %d out", q.Tries)
	case q.Failures > 0 && q.NextAt != nil:
		s = fmt.Sprintf("attempt %d failed %s, next at %s", q.Tries, q.Reason, clock(*q.NextAt))
	case q.NextAt != nil && q.Reason != "":
		s = fmt.Sprintf("%s; next at %s", q.Reason, clock(*q.NextAt))
	default:
		s = "waiting for a listener"
	}
	if q.PossibleDuplicate {
		s += " (next attempt a possible duplicate)"
	}
	return s
}

func clock(rfc string) string {
	t, err := time.Parse(time.RFC3339Nano, rfc)
	if err != nil {
		return rfc
	}
	return t.Local().Format("15:04:05")
}

// redriveDead puts an Endpoint's dead deliveries back in its queue.
func redriveDead(ctx context.Context, client *apiclient.Client, endpoint string, stdout io.Writer) error {
	ep, err := findEndpoint(ctx, client, endpoint)
	if err != nil {
		return err
	}
	var res struct{ RedriveDead int }
	if err := client.Do(ctx, `mutation($ep: ID!){ redriveDead(endpoint: $ep) }`, map[string]any{"ep": ep.ID}, &res); err != nil {
		return fmt.Errorf("redrive: %w", err)
	}
	fmt.Fprintf(stdout, "%d dead deliveries of %s back in its queue\n", res.RedriveDead, ep.Name)
	return nil
}

var errDeadWithAll = errors.New("--dead goes with --all: relay retry --all --dead ENDPOINT")
