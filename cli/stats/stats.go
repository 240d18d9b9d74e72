// Package stats is `relay stats`: an address's deliveries counted over time.
package stats

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/deliveries"
	"github.com/relayhq/relay/domain/duration"
)

// statsBucketJSON is a bucket of `relay stats -o json`, as the API gives it.
type statsBucketJSON struct {
	Start          string `json:"start"`
	Deliveries     int    `json:"deliveries"`
	Status2xx      int    `json:"status2xx"`
	Status3xx      int    `json:"status3xx"`
	Status4xx      int    `json:"status4xx"`
	Status5xx      int    `json:"status5xx"`
	Pending        int    `json:"pending"`
	Filtered       int    `json:"filtered"`
	Refused        int    `json:"refused"`
	Answers        int    `json:"answers"`
	P50Ms          *int   `json:"p50Ms"`
	P95Ms          *int   `json:"p95Ms"`
	OfflineSeconds *int   `json:"offlineSeconds"`
}

// statsJSON is what `relay stats -o json` prints: the address, its kind
// and its stats over the range.
type statsJSON struct {
	Address       string            `json:"address"`
	Kind          string            `json:"kind"`
	Range         string            `json:"range"`
	BucketSeconds int               `json:"bucketSeconds"`
	From          string            `json:"from"`
	To            string            `json:"to"`
	Totals        statsBucketJSON   `json:"totals"`
	Buckets       []statsBucketJSON `json:"buckets"`
}

const statsBucketFields = `start deliveries status2xx status3xx status4xx status5xx pending filtered refused answers p50Ms p95Ms offlineSeconds`

// Command is `relay stats`.
func Command(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var rng string
	cmd := &cobra.Command{
		Use:   "stats ADDRESS",
		Short: "Summarise an Endpoint's or inspector's deliveries, failures and latency over the last hour, day or week",
		Example: `  relay stats my-endpoint
  relay stats my-endpoint --range week
  relay stats k3x9q2 -o json | jq .totals.status5xx`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			want := strings.ToUpper(rng)
			switch want {
			case "HOUR", "DAY", "WEEK":
			default:
				return cmdutil.Usage(fmt.Errorf("--range %q: want hour, day or week", rng))
			}
			if err := conn.Resolve(c.Flags(), env); err != nil {
				return err
			}
			client := conn.Client(conn.Token)
			kind, id, err := deliveries.ResolveAddress(c.Context(), client, args[0])
			if err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			var res map[string]*struct {
				Stats statsJSON
			}
			q := `query($a: ID!, $r: StatsRange){ ` + kind + `(id: $a){ stats(range: $r){ range bucketSeconds from to
				totals{ ` + statsBucketFields + ` } buckets{ ` + statsBucketFields + ` } } } }`
			if err := client.Do(c.Context(), q, map[string]any{"a": id, "r": want}, &res); err != nil {
				return fmt.Errorf("stats: %w", err)
			}
			got := res[kind]
			if got == nil {
				return fmt.Errorf("stats: %w", deliveries.NotFound(args[0]))
			}
			st := got.Stats
			st.Address, st.Kind = id, kind
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, st)
			}
			printStats(stdout, st)
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	cmd.Flags().StringVar(&rng, "range", "hour", "the window: hour, day or week (60 buckets each)")
	return cmd
}

// printStats writes the compact text summary: totals, then a sparkline of
// deliveries and of failures (4xx and 5xx) per bucket.
func printStats(w io.Writer, st statsJSON) {
	t := st.Totals
	bucket := time.Duration(st.BucketSeconds) * time.Second
	fmt.Fprintf(w, "%s %s, last %s (%s to %s, %d buckets of %s)\n", st.Kind, st.Address, strings.ToLower(st.Range),
		cmdutil.LocalTime(st.From), cmdutil.LocalTime(st.To), len(st.Buckets), duration.Format(bucket))
	fmt.Fprintf(w, "deliveries  %d  (2xx %d, 3xx %d, 4xx %d, 5xx %d, pending %d)\n",
		t.Deliveries, t.Status2xx, t.Status3xx, t.Status4xx, t.Status5xx, t.Pending)
	fmt.Fprintf(w, "filtered    %d\nrefused     %d\n", t.Filtered, t.Refused)
	if t.Answers > 0 && t.P50Ms != nil && t.P95Ms != nil {
		fmt.Fprintf(w, "local answer  p50 <= %d ms, p95 <= %d ms  (%d timed)\n", *t.P50Ms, *t.P95Ms, t.Answers)
	} else {
		fmt.Fprintf(w, "local answer  none timed\n")
	}
	if t.OfflineSeconds != nil {
		fmt.Fprintf(w, "no listener %s\n", time.Duration(*t.OfflineSeconds)*time.Second)
	}
	volume := make([]int, len(st.Buckets))
	failed := make([]int, len(st.Buckets))
	for i, b := range st.Buckets {
		volume[i], failed[i] = b.Deliveries, b.Status4xx+b.Status5xx
	}
	fmt.Fprintf(w, "volume   |%s|\nfailures |%s|\n", sparkline(volume), sparkline(failed))
}

// sparkline draws counts as one line of block characters, scaled to the
// largest; a zero is a space.
func sparkline(counts []int) string {
	blocks := []rune("▁▂▃▄▅▆▇█")
	peak := 0
	for _, n := range counts {
		peak = max(peak, n)
	}
	var b strings.Builder
	for _, n := range counts {
		if n == 0 || peak == 0 {
			b.WriteRune(' ')
			continue
		}
		b.WriteRune(blocks[(n*len(blocks)-1)/peak])
	}
	return b.String()
}
