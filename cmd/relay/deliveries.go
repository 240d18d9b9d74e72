package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/relayhq/relay/apiclient"
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

// headerJSON is a header with its exact bytes when they are not UTF-8.
type headerJSON struct {
	Name        string  `json:"name"`
	Value       string  `json:"value"`
	ValueBase64 *string `json:"valueBase64"`
}

// attemptJSON is one try to reach the local target.
type attemptJSON struct {
	ID         string  `json:"id"`
	Status     *int    `json:"status"`
	StartedAt  string  `json:"startedAt"`
	DurationMs *int    `json:"durationMs"`
	Error      *string `json:"error"`
	Retry      bool    `json:"retry"`
	Late       bool    `json:"late"` // answered after the relay answered the sender itself
	// Edit is what an edited retry changed before sending; null when sent
	// as recorded.
	Edit *editJSON `json:"edit"`
	// Signature is the verdict of the agent's provider signature check
	// (relay listen --verify); null when none was made.
	Signature *string `json:"signature"`
	// Role is PRIMARY (what the sender got, or would have) or COPY (a copy
	// given to another listener, AgentID).
	Role    string  `json:"role"`
	AgentID *string `json:"agentId"`
	// Fidelity compares the agent's receipt of what it handed the local
	// process with what the relay sent (docs/evidence.md).
	Fidelity fidelityJSON `json:"fidelity"`
}

// fidelityJSON is an attempt's fidelity: IDENTICAL, DIFFERENT (naming
// the parts: REQUEST_LINE, HEADERS, BODY) or NOT_REPORTED.
type fidelityJSON struct {
	Status      string   `json:"status"`
	Differences []string `json:"differences"`
}

// String is the fidelity as `deliveries show` prints it.
func (f fidelityJSON) String() string {
	switch f.Status {
	case "IDENTICAL":
		return "identical"
	case "DIFFERENT":
		parts := make([]string, len(f.Differences))
		for i, p := range f.Differences {
			parts[i] = strings.ToLower(strings.ReplaceAll(p, "_", " "))
		}
		return "different: " + strings.Join(parts, ", ")
	case "NOT_REPORTED", "":
		return "not reported"
	}
	return termtext.Safe(f.Status, false)
}

// editJSON is an attempt's edit as the API answers it.
type editJSON struct {
	Method       *string      `json:"method"`
	Path         *string      `json:"path"`
	SetHeaders   []headerJSON `json:"setHeaders"`
	UnsetHeaders []string     `json:"unsetHeaders"`
	Body         *string      `json:"body"`
	BodyBase64   *string      `json:"bodyBase64"`
}

// attemptFields is what the client commands read of an attempt.
const attemptFields = `id status startedAt durationMs error retry late signature fidelity{ status differences } role agentId edit{ method path setHeaders{ name value valueBase64 } unsetHeaders body bodyBase64 }`

// deliveryJSON is `deliveries show -o json`: the recorded request, its
// attempts, the address's public URL and the curl command replaying it.
type deliveryJSON struct {
	ID             string        `json:"id"`
	Address        string        `json:"address"`
	URL            string        `json:"url"`
	Method         string        `json:"method"`
	Path           string        `json:"path"`
	PathBase64     *string       `json:"pathBase64"`
	Headers        []headerJSON  `json:"headers"`
	BodyBase64     string        `json:"bodyBase64"`
	BodySize       int           `json:"bodySize"`
	Complete       bool          `json:"complete"`
	BodyUnread     bool          `json:"bodyUnread"`  // refused (413) before its end
	StoredBytes    int           `json:"storedBytes"` // bytes of the body stored
	ReceivedAt     string        `json:"receivedAt"`
	ResponseStatus *int          `json:"responseStatus"`
	Attempts       []attemptJSON `json:"attempts"`
	Provider       *providerJSON `json:"provider"`
	Duplicates     int           `json:"duplicates"`
	// Why says in one sentence why the sender got responseStatus
	// (`deliveries explain` prints the facts behind it).
	Why string `json:"why"`
	// Curl replays the request byte for byte; it is empty when the body is
	// stored in part, and CurlWithheld says why.
	Curl         string `json:"curl"`
	CurlWithheld string `json:"curlWithheld,omitempty"`
}

const deliveryFields = `id address method path pathBase64 headers{ name value valueBase64 } bodyBase64 bodySize complete bodyUnread receivedAt responseStatus attempts{ ` + attemptFields + ` } provider{ name eventType deliveryId } duplicates`

func deliveriesCommand(env func(string) string, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deliveries",
		Aliases: []string{"delivery"},
		Short:   "List, search, show, explain, compare and export recorded deliveries",
		Example: `  relay deliveries list stripe --status 5xx
  relay deliveries show 0193a7c2-...
  relay deliveries explain 0193a7c2-...
  relay deliveries diff 0193a7c2-...
  relay deliveries export stripe -o stripe.har`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(deliveriesListCommand(env, stdout), deliveriesShowCommand(env, stdout), deliveriesExplainCommand(env, stdout),
		deliveriesDiffCommand(env, stdout), deliveriesExportCommand(env, stdout, stderr))
	return cmd
}

func deliveriesListCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
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
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if queueStates[f.status] {
				if err := conn.resolve(c.Flags(), env); err != nil {
					return err
				}
				return listQueued(c.Context(), conn.client(conn.token), args[0], f.status, limit, out, stdout)
			}
			filter, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			if limit < 1 {
				return usage(errors.New("--limit must be at least 1"))
			}
			if err := conn.resolve(c.Flags(), env); err != nil {
				return err
			}
			client := conn.client(conn.token)
			rows, searched, err := listDeliveries(c.Context(), client, args[0], limit, filter)
			if err != nil {
				return err
			}
			if out.json() {
				return writeJSON(stdout, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(stdout, "no deliveries")
			} else {
				tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RECEIVED\tMETHOD\tPATH\tSTATUS\tBYTES\tID\tEVENT")
				for _, d := range rows {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", localTime(d.ReceivedAt), d.Method, termtext.Safe(d.Path, false), statusText(d.ResponseStatus), d.BodySize, d.ID, eventText(d.Provider, d.Duplicates))
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
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
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
			return statusFlag{}, usage(fmt.Errorf("--status %q: want a status such as 502, a class such as 5xx, or pending", v))
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
			return nil, usage(fmt.Errorf("--path %q: want a path starting with /", f.path))
		}
		out["pathPrefix"] = f.path
	}
	for _, t := range []struct{ flag, value, key string }{{"--since", f.since, "receivedAfter"}, {"--until", f.until, "receivedBefore"}} {
		if t.value == "" {
			continue
		}
		at, err := timeFlag(t.value, now)
		if err != nil {
			return nil, usage(fmt.Errorf("%s %q: %w", t.flag, t.value, err))
		}
		out[t.key] = at.UTC().Format(time.RFC3339Nano)
	}
	if f.grep != "" {
		out["bodyContains"] = f.grep
	}
	if f.header != "" {
		name, value, hasValue := strings.Cut(f.header, "=")
		if name == "" || strings.ContainsAny(name, " \t:") {
			return nil, usage(fmt.Errorf("--header %q: want NAME or NAME=VALUE", f.header))
		}
		out["header"] = name
		if hasValue {
			out["headerValue"] = value
		}
	}
	if f.attempt != 0 {
		if f.attempt < 100 || f.attempt > 599 {
			return nil, usage(fmt.Errorf("--attempt-status %d: want a status such as 502", f.attempt))
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

// timeFlag reads a duration before now (1h) or a time (RFC 3339).
func timeFlag(v string, now time.Time) (time.Time, error) {
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
	kind, id, err := resolveAddress(ctx, client, ref)
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
			return nil, false, notFound(ref)
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

// noDelivery is the refusal for an id that names no delivery the token may
// read.
func noDelivery(id string) error {
	return &apiclient.Error{Message: fmt.Sprintf("no delivery %q (for this token)", id), Code: "NOT_FOUND"}
}

func notFound(ref string) error {
	return &apiclient.Error{Message: fmt.Sprintf("no endpoint or inspector %q (for this token)", ref), Code: "NOT_FOUND"}
}

// resolveAddress finds what ADDRESS names: one of the account's Endpoints
// (by id or name, when logged in), else an inspector. kind is the query
// field: "endpoint" or "inspector".
func resolveAddress(ctx context.Context, client *apiclient.Client, ref string) (kind, id string, err error) {
	if client.Token != "" {
		ep, err := findEndpoint(ctx, client, ref)
		if err == nil {
			return "endpoint", ep.ID, nil
		}
		var ae *apiclient.Error
		if !errors.As(err, &ae) || ae.Code != "NOT_FOUND" {
			return "", "", err
		}
	}
	var res struct{ Inspector *struct{ ID string } }
	if err := client.Do(ctx, `query($a: ID!){ inspector(id: $a){ id } }`, map[string]any{"a": ref}, &res); err != nil {
		return "", "", err
	}
	if res.Inspector == nil {
		return "", "", notFound(ref)
	}
	return "inspector", res.Inspector.ID, nil
}

// addressURL is the public URL of an inspector or Endpoint id.
func addressURL(ctx context.Context, client *apiclient.Client, id string) (string, error) {
	var res struct{ Inspector *struct{ URL string } }
	if err := client.Do(ctx, `query($a: ID!){ inspector(id: $a){ url } }`, map[string]any{"a": id}, &res); err != nil {
		return "", err
	}
	if res.Inspector != nil {
		return res.Inspector.URL, nil
	}
	var ep struct{ Endpoint *struct{ URL string } }
	if err := client.Do(ctx, `query($a: ID!){ endpoint(id: $a){ url } }`, map[string]any{"a": id}, &ep); err != nil {
		return "", err
	}
	if ep.Endpoint == nil {
		return "", notFound(id)
	}
	return ep.Endpoint.URL, nil
}

func deliveriesShowCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	var body bool
	cmd := &cobra.Command{
		Use:   "show DELIVERY_ID",
		Short: "Show a delivery's request, attempts, and a curl command that replays it",
		Example: `  relay deliveries show 0193a7c2-...
  relay deliveries show 0193a7c2-... --body
  relay deliveries show 0193a7c2-... -o json | jq -r .curl | sh`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if err := conn.resolve(c.Flags(), env); err != nil {
				return err
			}
			client := conn.client(conn.token)
			d, err := showDelivery(c.Context(), client, args[0])
			if err != nil {
				return err
			}
			if out.json() {
				return writeJSON(stdout, d)
			}
			printDelivery(stdout, d, body)
			return nil
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	cmd.Flags().BoolVar(&body, "body", false, "print the body too")
	return cmd
}

func showDelivery(ctx context.Context, client *apiclient.Client, id string) (deliveryJSON, error) {
	var res struct {
		Delivery *struct {
			deliveryJSON
			// The API's why is an object; show prints its summary. Being
			// shallower, this field takes "why" from deliveryJSON's.
			APIWhy struct{ Summary string } `json:"why"`
		}
	}
	if err := client.Do(ctx, `query($id: ID!){ delivery(id: $id){ `+deliveryFields+` why{ summary } } }`, map[string]any{"id": id}, &res); err != nil {
		return deliveryJSON{}, fmt.Errorf("show delivery: %w", err)
	}
	if res.Delivery == nil {
		return deliveryJSON{}, noDelivery(id)
	}
	d := res.Delivery.deliveryJSON
	d.Why = res.Delivery.APIWhy.Summary
	if d.Headers == nil {
		d.Headers = []headerJSON{}
	}
	if d.Attempts == nil {
		d.Attempts = []attemptJSON{}
	}
	url, err := addressURL(ctx, client, d.Address)
	if err != nil {
		return deliveryJSON{}, fmt.Errorf("show delivery: address %s: %w", d.Address, err)
	}
	d.URL = url
	path := exactText(d.Path, d.PathBase64)
	headers := make([]curlHeader, 0, len(d.Headers))
	for _, h := range d.Headers {
		headers = append(headers, curlHeader{name: h.Name, value: exactText(h.Value, h.ValueBase64)})
	}
	d.StoredBytes = base64.StdEncoding.DecodedLen(len(d.BodyBase64)) - strings.Count(d.BodyBase64, "=")
	if !d.Complete {
		// A replay of part of the body is not the request the sender made,
		// and a provider's signature over it would not verify.
		d.CurlWithheld = "the body is " + storedText(d) + ": a replay would not send the request as it arrived"
		return d, nil
	}
	d.Curl = curlCommand(d.Method, url, path, headers, d.BodyBase64, d.BodySize)
	return d, nil
}

// storedText says how much of an incomplete body is stored, and why.
func storedText(d deliveryJSON) string {
	sizes := fmt.Sprintf("stored %s of %s (incomplete", humanize.IBytes(uint64(d.StoredBytes)), humanize.IBytes(uint64(d.BodySize)))
	if d.BodyUnread {
		return sizes + ": refused over the relay's --max-body, read no further)"
	}
	return sizes + ")"
}

// exactText is text, or the bytes of raw when the API sent them.
func exactText(text string, raw *string) string {
	if raw == nil {
		return text
	}
	if b, err := base64.StdEncoding.DecodeString(*raw); err == nil {
		return string(b)
	}
	return text
}

func printDelivery(w io.Writer, d deliveryJSON, body bool) {
	fmt.Fprintf(w, "delivery %s to %s, received %s, answered %s\n", d.ID, d.Address, localTime(d.ReceivedAt), statusText(d.ResponseStatus))
	if d.Provider != nil {
		line := "provider: " + eventText(d.Provider, d.Duplicates)
		if d.Provider.DeliveryID != nil {
			line += ", its delivery id " + termtext.Safe(*d.Provider.DeliveryID, false)
		}
		if d.Duplicates > 0 {
			line += " (relay deliveries list " + d.Address + " --provider-id ID lists them all)"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "why: %s\n\n", termtext.Safe(d.Why, false))
	// The sender's bytes are escaped where they could drive the terminal.
	fmt.Fprintf(w, "%s %s\n", d.Method, termtext.Safe(d.Path, false))
	for _, h := range d.Headers {
		fmt.Fprintf(w, "%s: %s\n", termtext.Safe(h.Name, false), termtext.Safe(h.Value, false))
	}
	if !d.Complete {
		fmt.Fprintf(w, "\nbody: %s\n", storedText(d))
	}
	if body {
		b, _ := base64.StdEncoding.DecodeString(d.BodyBase64)
		switch {
		case len(b) == 0:
		case utf8.Valid(b):
			fmt.Fprintf(w, "\n%s\n", termtext.Safe(string(b), true))
		default:
			fmt.Fprintf(w, "\n(%d bytes, not UTF-8: see bodyBase64 in -o json)\n", len(b))
		}
	} else if d.BodySize > 0 {
		fmt.Fprintf(w, "\n(%d bytes of body; --body prints it)\n", d.BodySize)
	}
	if len(d.Attempts) > 0 {
		fmt.Fprintln(w, "\nattempts:")
		for i, a := range d.Attempts {
			line := describeAttempt(a.Status, a.DurationMs, a.Error)
			if a.Late {
				line += " (late: the sender had already been answered by the relay)"
			}
			if a.Role == "COPY" {
				line += " (copy for listener " + termtext.Safe(deref(a.AgentID, "?"), false) + ")"
			}
			if a.Signature != nil {
				line += "  signature " + termtext.Safe(*a.Signature, false)
			}
			line += "  fidelity " + a.Fidelity.String()
			fmt.Fprintf(w, "  %d: %s%s\n", i+1, line, describeEdit(a.Edit))
		}
	}
	switch {
	case d.CurlWithheld != "":
		fmt.Fprintf(w, "\nno replay command: %s\n", d.CurlWithheld)
	case termtext.HasControl(d.Curl):
		// Escaped, it would no longer replay the bytes; raw, it would
		// reach the terminal.
		fmt.Fprintln(w, "\nreplay with: the request holds control characters; the curl command is in -o json")
	case !body && d.BodySize > 0:
		// The command carries the body in base64: long, and only useful
		// to copy whole.
		fmt.Fprintf(w, "\nreplay with: relay deliveries show %s --body (the curl command, with the body), or -o json | jq -r .curl\n", d.ID)
	default:
		fmt.Fprintf(w, "\nreplay with:\n%s\n", d.Curl)
	}
}

func statusText(s *int) string {
	if s == nil {
		return "-"
	}
	return strconv.Itoa(*s)
}

// explanationJSON is `deliveries explain -o json`: why the sender got
// status, in one sentence and the dated facts of the log behind it.
type explanationJSON struct {
	ID      string     `json:"id"`
	Status  *int       `json:"status"`
	Summary string     `json:"summary"`
	Facts   []factJSON `json:"facts"`
	// Sender is what the sender's connection received (null while it
	// waits, or when it got none: senderLost); Shown where status comes
	// from (a retry's, which the sender never saw, after a retry).
	Sender     *senderAnswerJSON `json:"sender"`
	SenderLost bool              `json:"senderLost"`
	Shown      *shownStatusJSON  `json:"shown"`
}

type senderAnswerJSON struct {
	Status  int    `json:"status"`
	Attempt *int   `json:"attempt"` // null: the relay answered itself
	At      string `json:"at"`
}

type shownStatusJSON struct {
	Status  int    `json:"status"`
	Attempt *int   `json:"attempt"` // null: the relay's own answer
	Kind    string `json:"kind"`    // RELAY, FORWARD, RETRY, EDITED_RETRY
}

type factJSON struct {
	At   string `json:"at"`
	Text string `json:"text"`
}

func deliveriesExplainCommand(env func(string) string, stdout io.Writer) *cobra.Command {
	var conn connection
	var out output
	cmd := &cobra.Command{
		Use:   "explain DELIVERY_ID",
		Short: "Say why a delivery's sender got the status it got, with the facts from the log",
		Long: `Say why a delivery's sender got the status it got: who answered (the relay
itself, or your local process through an agent), what decided it and when,
then the dated facts from the log behind it (the request, the relay's own
answer, each attempt and its outcome, the agent sessions that decided it).`,
		Example: `  relay deliveries explain 0193a7c2-...
  relay deliveries explain 0193a7c2-... -o json | jq -r .summary`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if err := out.check(); err != nil {
				return err
			}
			if err := conn.resolve(c.Flags(), env); err != nil {
				return err
			}
			x, err := explainDelivery(c.Context(), conn.client(conn.token), args[0])
			if err != nil {
				return err
			}
			if out.json() {
				return writeJSON(stdout, x)
			}
			printExplanation(stdout, x)
			return nil
		},
	}
	conn.flags(cmd.Flags())
	out.flags(cmd.Flags())
	return cmd
}

func explainDelivery(ctx context.Context, client *apiclient.Client, id string) (explanationJSON, error) {
	var res struct {
		Delivery *struct {
			ID  string
			Why struct {
				Status     *int
				Summary    string
				Facts      []factJSON
				Sender     *senderAnswerJSON
				SenderLost bool
				Shown      *shownStatusJSON
			}
		}
	}
	q := `query($id: ID!){ delivery(id: $id){ id why{ status summary facts{ at text }
		sender{ status attempt at } senderLost shown{ status attempt kind } } } }`
	if err := client.Do(ctx, q, map[string]any{"id": id}, &res); err != nil {
		return explanationJSON{}, fmt.Errorf("explain delivery: %w", err)
	}
	if res.Delivery == nil {
		return explanationJSON{}, noDelivery(id)
	}
	w := res.Delivery.Why
	x := explanationJSON{ID: res.Delivery.ID, Status: w.Status, Summary: w.Summary, Facts: w.Facts,
		Sender: w.Sender, SenderLost: w.SenderLost, Shown: w.Shown}
	if x.Facts == nil {
		x.Facts = []factJSON{}
	}
	return x, nil
}

// printExplanation prints the sentence, then each fact after its time.
// The facts quote agents' errors and recorded reasons: they are escaped
// like a sender's bytes.
func printExplanation(w io.Writer, x explanationJSON) {
	fmt.Fprintln(w, termtext.Safe(x.Summary, false))
	if len(x.Facts) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, f := range x.Facts {
		fmt.Fprintf(w, "%s  %s\n", localTime(f.At), termtext.Safe(f.Text, false))
	}
}
