package endpoints

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
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
			return cmdutil.Usage(fmt.Errorf("--ordering %q: want strict or unordered", q.ordering))
		}
		p["ordering"] = o
	}
	if fs.Changed("retry-on") {
		classes, err := domain.ParseRetryOn(q.retryOn)
		if err != nil {
			return cmdutil.Usage(fmt.Errorf("--retry-on: %w", err))
		}
		p["retryOn"] = classes
	}
	for _, f := range []struct{ name, field, v string }{{"backoff-base", "backoffBase", q.base}, {"backoff-cap", "backoffCap", q.cap}, {"max-age", "maxAge", q.maxAge}} {
		if !fs.Changed(f.name) {
			continue
		}
		v := strings.TrimSpace(f.v)
		if strings.HasPrefix(v, "-") {
			return cmdutil.Usage(fmt.Errorf("--%s %q: must not be negative", f.name, f.v))
		}
		if _, err := duration.Parse(v); err != nil {
			return cmdutil.Usage(fmt.Errorf("--%s: %w", f.name, err))
		}
		p[f.field] = v
	}
	if len(p) > 0 {
		in["queue"] = p
	}
	return nil
}

// queueFields is what endpoint commands read of Endpoint.queue.
const queueFields = `queue{ queued inFlight dead policy{ maxInFlight ratePerSecond ordering retryOn backoffBase backoffCap maxAttempts maxAge } }`

// queueJSON is Endpoint.queue.
type queueJSON struct {
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

func printQueue(w io.Writer, q *queueJSON) {
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
