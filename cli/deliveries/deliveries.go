// Package deliveries is `relay deliveries` (list, show, explain, diff,
// export), and `relay retry` and `relay tail`, which act on deliveries too.
package deliveries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/internal/termtext"
)

// deliveryRow is a delivery in lists: `deliveries list -o json` prints an
// array of them, `tail -o json` one per line.
type deliveryRow struct {
	ID             string `json:"id"`
	Address        string `json:"address"`
	Method         string `json:"method"`
	Path           string `json:"path"`
	ReceivedAt     string `json:"receivedAt"`
	ResponseStatus *int   `json:"responseStatus"`
	BodySize       int    `json:"bodySize"`
	Attempts       int    `json:"attempts"`
	// Provider is the webhook provider recognised (null for none);
	// Duplicates counts the other deliveries with its delivery id.
	Provider   *providerJSON `json:"provider"`
	Duplicates int           `json:"duplicates"`
	// Hint is what the relay noticed of the request and how to act on it
	// (a provider's verification request the address does not answer).
	Hint *string `json:"hint,omitempty"`
}

// providerJSON is Delivery.provider.
type providerJSON struct {
	Name       string  `json:"name"`
	EventType  *string `json:"eventType"`
	DeliveryID *string `json:"deliveryId"`
}

const deliveryRowFields = `id address method path receivedAt responseStatus bodySize cursor attempts{ status } provider{ name eventType deliveryId } duplicates hint`

// apiDeliveryRow is deliveryRowFields as the API answers them.
type apiDeliveryRow struct {
	ID, Address, Method, Path, ReceivedAt, Cursor string
	ResponseStatus                                *int
	BodySize                                      int
	Attempts                                      []struct{ Status *int }
	Provider                                      *providerJSON
	Duplicates                                    int
	Hint                                          *string
}

func (d apiDeliveryRow) row() deliveryRow {
	return deliveryRow{ID: d.ID, Address: d.Address, Method: d.Method, Path: d.Path, ReceivedAt: d.ReceivedAt,
		ResponseStatus: d.ResponseStatus, BodySize: d.BodySize, Attempts: len(d.Attempts), Provider: d.Provider, Duplicates: d.Duplicates,
		Hint: d.Hint}
}

// eventText is a row's provider event for a terminal: "github push",
// with "(sent 2 times)" for a redelivered one; "" for none.
func eventText(p *providerJSON, duplicates int) string {
	if p == nil {
		return ""
	}
	s := p.Name
	if p.EventType != nil {
		s += " " + termtext.Safe(*p.EventType, false)
	}
	if duplicates > 0 {
		s += fmt.Sprintf(" (sent %d times)", duplicates+1)
	}
	return s
}

// Command is `relay deliveries`.
func Command(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deliveries",
		Aliases: []string{"delivery"},
		Short:   "List, search, show, explain, compare and export recorded deliveries",
		Example: `  relay deliveries list stripe --status 5xx
  relay deliveries show 0193a7c2-...
  relay deliveries explain 0193a7c2-...
  relay deliveries diff 0193a7c2-...
  relay deliveries export stripe -o stripe.har`,
	}
	cmd.AddCommand(deliveriesListCommand(env, stdout), deliveriesShowCommand(env, stdout), deliveriesExplainCommand(env, stdout),
		deliveriesDiffCommand(env, stdout), deliveriesExportCommand(env, stdout, stderr))
	return cmd
}

func deliveriesListCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn cmdutil.Connection
	var out cmdutil.Output
	var f listFlags
	var limit int
	cmd := &cobra.Command{
		Use:     "list ADDRESS",
		Aliases: []string{"ls"},
		Short:   "List or search an Endpoint's or inspector's deliveries, newest first",
		Long: `List an Endpoint's or inspector's deliveries, newest first. ADDRESS is an
Endpoint's id or name, or an inspector's id. The filters are applied by the relay
(the deliveries query's filter), over the whole history, and combine: a delivery is
listed when it matches all of them.`,
		Example: `  relay deliveries list stripe
  relay deliveries list stripe --status 5xx --path /webhooks --since 1h --grep charge
  relay deliveries list stripe --header X-GitHub-Event=push --limit 5
  relay deliveries list ep-abc123 -o json | jq -r '.[0].id'`,
		Args: cmdutil.UsageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if queueStates[f.status] {
				if err := conn.Resolve(c.Flags(), env); err != nil {
					return err
				}
				return listQueued(c.Context(), conn.Client(conn.Token), args[0], f.status, limit, out, stdout)
			}
			filter, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			if limit < 1 {
				return cmdutil.Usage(errors.New("--limit must be at least 1"))
			}
			if err := conn.Resolve(c.Flags(), env); err != nil {
				return err
			}
			client := conn.Client(conn.Token)
			rows, searched, err := listDeliveries(c.Context(), client, args[0], limit, filter)
			if err != nil {
				return err
			}
			if out.JSON() {
				return cmdutil.WriteJSON(stdout, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(stdout, "no deliveries")
			} else {
				tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RECEIVED\tMETHOD\tPATH\tSTATUS\tBYTES\tID\tEVENT")
				for _, d := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", cmdutil.LocalTime(d.ReceivedAt), d.Method, termtext.Safe(d.Path, false), statusText(d.ResponseStatus), d.BodySize, d.ID, eventText(d.Provider, d.Duplicates))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if searched {
				fmt.Fprintf(stdout, "(the search stopped after %d pages of history; narrow it, or page on with the API's filter)\n", maxListPages)
			}
			return nil
		},
	}
	conn.Flags(cmd.Flags())
	out.Flags(cmd.Flags())
	fs := cmd.Flags()
	fs.StringVar(&f.status, "status", "", "answered with this status or class (502, 5xx), or pending; queued, inflight or dead: a QUEUE Endpoint's queue")
	fs.StringVar(&f.method, "method", "", "sent with this method (POST)")
	fs.StringVar(&f.path, "path", "", "whose request target starts with this (/webhooks)")
	fs.StringVar(&f.since, "since", "", "received within this long (1h, 30m, 1d) or since this time (RFC 3339)")
	fs.StringVar(&f.until, "until", "", "received before this long ago or this time")
	fs.StringVar(&f.grep, "grep", "", "whose stored body contains this text (case-sensitive)")
	fs.StringVar(&f.header, "header", "", "with this header (NAME) or header value (NAME=VALUE)")
	fs.IntVar(&f.attempt, "attempt-status", 0, "an attempt to reach the local target got this status")
	fs.BoolVar(&f.incomplete, "incomplete", false, "whose body was stored in part")
	fs.StringVar(&f.event, "event", "", "of this provider event type (push, charge.succeeded)")
	fs.StringVar(&f.providerID, "provider-id", "", "with this provider delivery id: a delivery and its redeliveries")
	fs.IntVar(&limit, "limit", 20, "at most this many deliveries")
	return cmd
}

// listFlags are deliveries list's filters as typed.
type listFlags struct {
	status, method, path, since, until, grep, header string
	event, providerID                                string
	attempt                                          int
	incomplete                                       bool
}

var statusClass = regexp.MustCompile(`^[1-5]xx$`)

// statusFlag is a --status: a status (502), a class (5xx: 5), or pending;
// the zero value for none.
type statusFlag struct {
	status, class int
	pending       bool
}

// parseStatus reads --status.
func parseStatus(v string) (statusFlag, error) {
	switch s := strings.ToLower(strings.TrimSpace(v)); {
	case s == "":
		return statusFlag{}, nil
	case s == "pending":
		return statusFlag{pending: true}, nil
	case statusClass.MatchString(s):
		return statusFlag{class: int(s[0] - '0')}, nil
	default:
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return statusFlag{}, cmdutil.Usage(fmt.Errorf("--status %q: want a status such as 502, a class such as 5xx, or pending", v))
		}
		return statusFlag{status: n}, nil
	}
}

// matches reports whether an answered status (nil: none yet) is one the
// flag names.
func (f statusFlag) matches(st *int) bool {
	switch {
	case f.pending:
		return st == nil
	case f.class != 0:
		return st != nil && *st/100 == f.class
	case f.status != 0:
		return st != nil && *st == f.status
	}
	return true
}

// filter is the deliveries query's filter the flags ask for (nil: none).
func (f listFlags) filter(now time.Time) (map[string]any, error) {
	out := map[string]any{}
	st, err := parseStatus(f.status)
	switch {
	case err != nil:
		return nil, err
	case st.pending:
		out["pending"] = true
	case st.class != 0:
		out["statusClass"] = st.class
	case st.status != 0:
		out["status"] = st.status
	}
	if f.method != "" {
		out["method"] = strings.ToUpper(f.method)
	}
	if f.path != "" {
		if !strings.HasPrefix(f.path, "/") {
			return nil, cmdutil.Usage(fmt.Errorf("--path %q: want a path starting with /", f.path))
		}
		out["pathPrefix"] = f.path
	}
	for _, t := range []struct{ flag, value, key string }{{"--since", f.since, "receivedAfter"}, {"--until", f.until, "receivedBefore"}} {
		if t.value == "" {
			continue
		}
		at, err := TimeFlag(t.value, now)
		if err != nil {
			return nil, cmdutil.Usage(fmt.Errorf("%s %q: %w", t.flag, t.value, err))
		}
		out[t.key] = at.UTC().Format(time.RFC3339Nano)
	}
	if f.grep != "" {
		out["bodyContains"] = f.grep
	}
	if f.header != "" {
		name, value, hasValue := strings.Cut(f.header, "=")
		if name == "" || strings.ContainsAny(name, " \t:") {
			return nil, cmdutil.Usage(fmt.Errorf("--header %q: want NAME or NAME=VALUE", f.header))
		}
		out["header"] = name
		if hasValue {
			out["headerValue"] = value
		}
	}
	if f.attempt != 0 {
		if f.attempt < 100 || f.attempt > 599 {
			return nil, cmdutil.Usage(fmt.Errorf("--attempt-status %d: want a status such as 502", f.attempt))
		}
		out["attemptStatus"] = f.attempt
	}
	if f.incomplete {
		out["incompleteBody"] = true
	}
	if f.event != "" {
		out["providerEvent"] = f.event
	}
	if f.providerID != "" {
		out["providerDeliveryId"] = f.providerID
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// TimeFlag reads a duration before now (1h) or a time (RFC 3339).
func TimeFlag(v string, now time.Time) (time.Time, error) {
	if d, err := duration.Parse(v); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("want a positive duration")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errors.New("want a duration such as 1h or 1d, or a time such as 2026-11-25T08:00:00Z")
	}
	return t, nil
}

// maxListPages bounds the pages a list reads: a filtered page examines
// a bounded share of the history, so a rare match may take several.
const maxListPages = 20

// listDeliveries pages through an address's history, filtered by the
// relay, until limit rows. searched is true when it stopped at
// maxListPages with history left to search.
func listDeliveries(ctx context.Context, client *apiclient.Client, ref string, limit int, filter map[string]any) (rows []deliveryRow, searched bool, err error) {
	kind, id, err := ResolveAddress(ctx, client, ref)
	if err != nil {
		return nil, false, err
	}
	q := fmt.Sprintf(`query($a: ID!, $n: Int, $after: String, $f: DeliveryFilter){ %s(id: $a){ deliveries(first: $n, after: $after, filter: $f){ nodes{ %s } pageInfo{ hasNextPage endCursor } } } }`, kind, deliveryRowFields)
	rows = []deliveryRow{}
	var after *string
	for page := 0; len(rows) < limit; page++ {
		if page == maxListPages {
			return rows, true, nil
		}
		var res map[string]*struct {
			Deliveries struct {
				Nodes    []apiDeliveryRow
				PageInfo struct {
					HasNextPage bool
					EndCursor   *string
				}
			}
		}
		vars := map[string]any{"a": id, "n": min(100, limit-len(rows)), "after": after}
		if filter != nil {
			vars["f"] = filter
		}
		if err := client.Do(ctx, q, vars, &res); err != nil {
			return nil, false, fmt.Errorf("list deliveries: %w", err)
		}
		a := res[kind]
		if a == nil {
			return nil, false, NotFound(ref)
		}
		for _, d := range a.Deliveries.Nodes {
			if len(rows) < limit {
				rows = append(rows, d.row())
			}
		}
		if !a.Deliveries.PageInfo.HasNextPage {
			break
		}
		after = a.Deliveries.PageInfo.EndCursor
	}
	return rows, false, nil
}

func statusText(s *int) string {
	if s == nil {
		return "-"
	}
	return strconv.Itoa(*s)
}
