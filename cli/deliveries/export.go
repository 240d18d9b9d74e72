package deliveries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/bundle"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cli/version"
	"github.com/relayhq/relay/deliveryjson"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/har"
)

// Bounds of an export. The ids of the chosen deliveries are held in memory
// (some 40 bytes each), the deliveries themselves one batch at a time.
const (
	defaultExportLimit = 1000
	maxExportLimit     = 10_000
	// maxExportScanPages bounds the history pages read to find the
	// deliveries a filter matches: 20 000 rows, ids only.
	maxExportScanPages = 200
	// exportBatch is how many deliveries one API call reads with their
	// bodies. With the default capture cap a batch answers about 3 MiB,
	// far under the API's --max-api-answer (32 MiB), and costs about 1 500
	// points of the 10 000 --max-query-cost allows (docs/security.md). A
	// batch the relay refuses as too large is read again one by one.
	exportBatch = 8
)

func deliveriesExportCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var format, out, status, since string
	var limit int
	cmd := &cobra.Command{
		Use:   "export ADDRESS",
		Short: "Write an address's deliveries as a HAR file or a replay bundle",
		Long: `Write an Endpoint's or inspector's recorded deliveries, oldest first, as
HAR 1.2 (--format har: for browser devtools, HAR viewers and HTTP tools) or as
a replay bundle (--format bundle: the exact bytes of every request, which
relay replay sends again without a relay). ADDRESS is an Endpoint's id or
name, or an inspector's id. The newest --limit deliveries that match the
filters are written; a body or headers stored in part are marked as such.
See docs/exports.md.`,
		Example: `  relay deliveries export stripe > stripe.har
  relay deliveries export stripe --status 5xx --since 24h -o failures.har
  relay deliveries export ep-abc123 --format bundle -o stripe.bundle
  relay replay stripe.bundle --to http://localhost:3000`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			// First: it also fills flags from RELAY_<FLAG>, which are then
			// checked like the others.
			if err := conn.Resolve(c.Flags(), env); err != nil {
				return err
			}
			if err := checkOutFile(out); err != nil {
				return err
			}
			var w func(io.Writer) deliveryjson.Writer
			switch format {
			case "har":
				w = func(out io.Writer) deliveryjson.Writer { return har.NewWriter(out) }
			case "bundle":
				w = func(out io.Writer) deliveryjson.Writer { return bundle.NewWriter(out) }
			default:
				return cmdutil.Usage(fmt.Errorf("--format %q: want har or bundle", format))
			}
			st, err := parseStatus(status)
			if err != nil {
				return err
			}
			match := st.matches
			if limit < 1 || limit > maxExportLimit {
				return cmdutil.Usage(fmt.Errorf("--limit %d: want 1 to %d", limit, maxExportLimit))
			}
			var after time.Time
			if since != "" {
				d, err := duration.Parse(since)
				if err != nil || d <= 0 {
					return cmdutil.Usage(fmt.Errorf("--since %q: want a duration such as 30m, 24h or 7d", since))
				}
				after = time.Now().Add(-d)
			}
			client := conn.Client(conn.Token)
			filter := exportFilter{limit: limit, match: match, after: after, describe: describeFilter(status, since, limit)}
			return exportDeliveries(c.Context(), client, args[0], filter, out, stdout, stderr, w)
		},
	}
	conn.Flags(cmd.Flags())
	cmd.Flags().StringVar(&format, "format", "har", "har (HAR 1.2) or bundle (a replay bundle for relay replay)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "write to this file (written whole or not at all) instead of stdout; the format is --format's, so -o json and -o text are refused")
	cmd.Flags().StringVar(&status, "status", "", "only deliveries answered with this status or class: 502, 5xx, 2xx")
	cmd.Flags().StringVar(&since, "since", "", "only deliveries received within this duration: 30m, 24h, 7d")
	cmd.Flags().IntVar(&limit, "limit", defaultExportLimit, fmt.Sprintf("at most this many deliveries, the newest that match (up to %d)", maxExportLimit))
	return cmd
}

// checkOutFile refuses an -o that names an output format (-o json, as
// other commands take it) rather than a file: export's -o is the file to
// write, its format --format. A file of that name is still written as
// ./json.
func checkOutFile(out string) error {
	switch out {
	case "json", "text":
		return cmdutil.Usage(fmt.Errorf("-o %q: deliveries export writes HAR (JSON already) or a replay bundle, chosen by --format har|bundle; its -o names the file to write (-o deliveries.har; ./%s for a file named %s)", out, out, out))
	}
	return nil
}

// exportFilter chooses the deliveries of an export.
type exportFilter struct {
	limit    int
	match    func(*int) bool
	after    time.Time // zero: any time
	describe string
}

func describeFilter(status, since string, limit int) string {
	parts := []string{"newest " + strconv.Itoa(limit)}
	if status != "" {
		parts = append(parts, "status "+status)
	}
	if since != "" {
		parts = append(parts, "received within "+since)
	}
	return strings.Join(parts, ", ")
}

// exportDeliveries finds the deliveries, then writes them oldest first.
// The file is written under a temporary name and renamed once complete, so
// a failed export leaves no file that looks whole.
func exportDeliveries(ctx context.Context, client *apiclient.Client, ref string, f exportFilter, outPath string, stdout, stderr io.Writer, newWriter func(io.Writer) deliveryjson.Writer) error {
	kind, id, err := ResolveAddress(ctx, client, ref)
	if err != nil {
		return err
	}
	url, err := addressURL(ctx, client, id)
	if err != nil {
		return fmt.Errorf("export: address %s: %w", id, err)
	}
	ids, truncated, err := exportIDs(ctx, client, kind, id, f)
	if err != nil {
		return err
	}
	if truncated {
		fmt.Fprintf(stderr, "note: looked through the newest %d deliveries only; narrow --status or --since to reach older ones\n", maxExportScanPages*100)
	}
	out, commit, abort, err := cmdutil.ExportOut(outPath, stdout)
	if err != nil {
		return err
	}
	defer abort()
	w := newWriter(out)
	if err := w.Begin(deliveryjson.Meta{Address: id, URL: url, ExportedAt: time.Now().UTC(), Filter: f.describe, Version: version.Text()}); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	written, incomplete := 0, 0
	err = fetchDeliveries(ctx, client, ids, func(d deliveryjson.Export) error {
		written++
		if d.IncompleteText() != "" {
			incomplete++
		}
		return w.Entry(d)
	}, func(id string) {
		fmt.Fprintf(stderr, "note: delivery %s is gone (removed since the export began); left out\n", id)
	})
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := w.End(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := commit(); err != nil {
		return err
	}
	if incomplete > 0 {
		fmt.Fprintf(stderr, "note: %s stored in part; they are marked incomplete (_relay.complete in HAR, complete in a bundle) and relay replay skips them\n", domain.Counted(incomplete, "delivery is", "deliveries are"))
	}
	if outPath != "" {
		fmt.Fprintf(stderr, "exported %s of %s to %s\n", domain.Counted(written, "delivery", "deliveries"), id, outPath)
	}
	return nil
}

// exportIDs pages through the address's history, newest first, reading
// ids only, until limit deliveries match; it returns them oldest first.
// truncated says the scan stopped at maxExportScanPages.
func exportIDs(ctx context.Context, client *apiclient.Client, kind, id string, f exportFilter) (ids []string, truncated bool, err error) {
	q := fmt.Sprintf(`query($a: ID!, $after: String){ %s(id: $a){ deliveries(first: 100, after: $after){ nodes{ id responseStatus receivedAt } pageInfo{ hasNextPage endCursor } } } }`, kind)
	var after *string
	for page := 0; ; page++ {
		if page == maxExportScanPages {
			truncated = true
			break
		}
		var res map[string]*struct {
			Deliveries struct {
				Nodes []struct {
					ID             string
					ResponseStatus *int
					ReceivedAt     time.Time
				}
				PageInfo struct {
					HasNextPage bool
					EndCursor   *string
				}
			}
		}
		if err := client.Do(ctx, q, map[string]any{"a": id, "after": after}, &res); err != nil {
			return nil, false, fmt.Errorf("export: list deliveries: %w", err)
		}
		a := res[kind]
		if a == nil {
			return nil, false, NotFound(id)
		}
		done := false
		for _, d := range a.Deliveries.Nodes {
			// Newest first: the first one older than --since ends the scan.
			if !f.after.IsZero() && d.ReceivedAt.Before(f.after) {
				done = true
				break
			}
			if f.match(d.ResponseStatus) {
				ids = append(ids, d.ID)
				if len(ids) == f.limit {
					done = true
					break
				}
			}
		}
		if done || !a.Deliveries.PageInfo.HasNextPage {
			break
		}
		after = a.Deliveries.PageInfo.EndCursor
	}
	for i, j := 0, len(ids)-1; i < j; i, j = i+1, j-1 {
		ids[i], ids[j] = ids[j], ids[i]
	}
	return ids, truncated, nil
}

// fetchDeliveries reads the deliveries ids name, with their bodies, in
// batches of exportBatch, and hands each to fn in the order of ids. A
// delivery the relay no longer has is passed to gone. A batch the relay
// refuses as too large for one answer (a few large captured responses)
// is read again one delivery at a time.
func fetchDeliveries(ctx context.Context, client *apiclient.Client, ids []string, fn func(deliveryjson.Export) error, gone func(id string)) error {
	for start := 0; start < len(ids); start += exportBatch {
		batch := ids[start:min(start+exportBatch, len(ids))]
		got, err := fetchBatch(ctx, client, batch)
		if tooLarge(err) && len(batch) > 1 {
			got = make([]*deliveryjson.Export, 0, len(batch))
			for _, id := range batch {
				one, err := fetchBatch(ctx, client, []string{id})
				if err != nil {
					return fmt.Errorf("read delivery %s: %w", id, err)
				}
				got = append(got, one[0])
			}
		} else if err != nil {
			return fmt.Errorf("read deliveries %s…: %w", batch[0], err)
		}
		for i, d := range got {
			if d == nil {
				gone(batch[i])
				continue
			}
			if err := fn(*d); err != nil {
				return err
			}
		}
	}
	return nil
}

// tooLarge reports whether the relay refused an answer for its size or its
// share of the answers being built at once; a smaller one may pass.
func tooLarge(err error) bool {
	var ae *apiclient.Error
	return errors.As(err, &ae) && (ae.Code == "ANSWER_TOO_LARGE" || ae.Code == "UNAVAILABLE")
}

// fetchBatch reads deliveries by id in one operation: one aliased
// delivery(id) field each, sharing a fragment (so the document stays far
// under the API's token and field limits). A nil entry is a delivery the
// relay does not have.
func fetchBatch(ctx context.Context, client *apiclient.Client, ids []string) ([]*deliveryjson.Export, error) {
	var q strings.Builder
	vars := make(map[string]any, len(ids))
	q.WriteString("query(")
	for i, id := range ids {
		if i > 0 {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "$i%d: ID!", i)
		vars["i"+strconv.Itoa(i)] = id
	}
	q.WriteString("){")
	for i := range ids {
		fmt.Fprintf(&q, " d%d: delivery(id: $i%d){ ...D }", i, i)
	}
	q.WriteString(" } fragment D on Delivery { " + deliveryjson.ExportFields + " }")
	var res map[string]*deliveryjson.Export
	if err := client.Do(ctx, q.String(), vars, &res); err != nil {
		return nil, err
	}
	out := make([]*deliveryjson.Export, len(ids))
	for i := range ids {
		out[i] = res["d"+strconv.Itoa(i)]
	}
	return out, nil
}
