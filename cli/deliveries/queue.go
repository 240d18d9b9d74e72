package deliveries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/endpoints"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/termtext"
)

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
		Status            string  `json:"status"`
		Tries             int     `json:"tries"`
		Failures          int     `json:"failures"`
		NextAt            *string `json:"nextAt"`
		Reason            string  `json:"reason"`
		PossibleDuplicate bool    `json:"possibleDuplicate"`
	} `json:"queue"`
}

// listQueued prints an Endpoint's queue in one state, at most 500 (what one
// operation's cost allows).
func listQueued(ctx context.Context, client *apiclient.Client, endpoint, state string, limit int, out cmdutil.Output, stdout io.Writer) error {
	ep, err := endpoints.Find(ctx, client, endpoint)
	if err != nil {
		return err
	}
	var res struct{ QueuedDeliveries []queuedJSON }
	const q = `query($ep: ID!, $state: String, $first: Int){ queuedDeliveries(endpoint: $ep, state: $state, first: $first){
		delivery{ id method path receivedAt } queue{ state status tries failures nextAt reason possibleDuplicate } } }`
	if err := client.Do(ctx, q, map[string]any{"ep": ep.ID, "state": state, "first": min(limit, 500)}, &res); err != nil {
		return fmt.Errorf("list queue: %w", err)
	}
	if out.JSON() {
		if res.QueuedDeliveries == nil {
			res.QueuedDeliveries = []queuedJSON{}
		}
		return cmdutil.WriteJSON(stdout, res.QueuedDeliveries)
	}
	if len(res.QueuedDeliveries) == 0 {
		fmt.Fprintf(stdout, "no %s deliveries\n", state)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIVED\tMETHOD\tPATH\tSTATE\tID\tWHY")
	for _, d := range res.QueuedDeliveries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cmdutil.LocalTime(d.Delivery.ReceivedAt), d.Delivery.Method, termtext.Safe(d.Delivery.Path, false),
			d.Queue.State, d.Delivery.ID, termtext.Safe(d.Queue.Status, false))
	}
	return tw.Flush()
}

// redriveDead puts an Endpoint's dead deliveries back in its queue, a
// page of at most redrivePerCall at a time, each page going on after the
// one before: a delivery put back that dies again meanwhile is not put back
// twice. At most maxRedrivePages pages (the largest backlog an Endpoint may
// have).
func redriveDead(ctx context.Context, client *apiclient.Client, endpoint string, stdout io.Writer) error {
	ep, err := endpoints.Find(ctx, client, endpoint)
	if err != nil {
		return err
	}
	total, leftDead, more := 0, 0, false
	var after *string
	for range maxRedrivePages {
		var res struct {
			RedriveDeadPage struct {
				Redriven    int
				LeftDead    int
				EndCursor   string
				HasNextPage bool
			}
		}
		err := client.Do(ctx, `mutation($ep: ID!, $after: String){ redriveDeadPage(endpoint: $ep, after: $after){ redriven leftDead endCursor hasNextPage } }`,
			map[string]any{"ep": ep.ID, "after": after}, &res)
		if wait, ok := rateLimited(err); ok {
			// The relay admits an account's redrives at its bulk rate:
			// the same page is asked again once it says.
			fmt.Fprintf(stdout, "%d back so far; the relay admits redrives at its rate: going on in %s\n", total, wait)
			if err := waitFor(ctx, wait); err != nil {
				return fmt.Errorf("redrive: %w", err)
			}
			continue
		}
		if err != nil {
			if total > 0 {
				fmt.Fprintf(stdout, "%s of %s back in its queue before this failed\n", domain.Counted(total, "dead delivery", "dead deliveries"), ep.Name)
			}
			return fmt.Errorf("redrive: %w", err)
		}
		page := res.RedriveDeadPage
		total += page.Redriven
		leftDead += page.LeftDead
		if more = page.HasNextPage; !more {
			break
		}
		cursor := page.EndCursor
		after = &cursor
	}
	fmt.Fprintf(stdout, "%s of %s back in its queue\n", domain.Counted(total, "dead delivery", "dead deliveries"), ep.Name)
	if leftDead > 0 {
		fmt.Fprintf(stdout, "%d left dead: each has had %d attempts or %d redrives, the most one delivery may have\n",
			leftDead, domain.MaxDeliveryAttempts, domain.MaxDeliveryRedrives)
	}
	if more {
		fmt.Fprintf(stdout, "more may be dead: run it again to go on\n")
	}
	return nil
}

// rateLimited reports whether err is the relay's RATE_LIMITED refusal,
// and how long it asks to wait (at least a second).
func rateLimited(err error) (time.Duration, bool) {
	var ae *apiclient.Error
	if !errors.As(err, &ae) || ae.Code != "RATE_LIMITED" {
		return 0, false
	}
	secs, _ := ae.Extensions["retryAfterSeconds"].(float64)
	return time.Duration(max(secs, 1)) * time.Second, true
}

// waitFor waits d or until ctx ends; a variable so a test need not wait.
var waitFor = func(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redrivePerCall is the most one redriveDeadPage call puts back
// (schema.graphqls); maxRedrivePages bounds the calls of one run to the
// largest queue backlog (--queue-backlog at most 10 000 000).
const (
	redrivePerCall  = 1000
	maxRedrivePages = 10_000_000 / redrivePerCall
)

var errDeadWithAll = errors.New("--dead goes with --all: relay retry --all --dead ENDPOINT")
