package graph_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
)

// budgetEnv is newEnv whose answers may each read budget bytes of the log
// for stored answers (Limits.AnswerLogBytes).
func budgetEnv(t *testing.T, budget int64) *env {
	t.Helper()
	var res *graph.Resolver
	e := newEnvWith(t, nil, func(r *graph.Resolver) { res = r })
	e.h = graph.NewHandler(res, graph.ServerOptions{Limits: graph.Limits{AnswerLogBytes: budget}})
	e.c = client.New(e.h)
	return e
}

// seedAnswered records delivery id at acct's Endpoint, tried answers
// times, attempt i (id-a<i>) answered 200+i with a captured body of size
// bytes.
func seedAnswered(t *testing.T, e *env, acct signedUpAccount, id string, answers, size int) {
	t.Helper()
	events := []domain.Event{domain.DeliveryReceived{DeliveryID: id, Address: acct.endpoint, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
		Method: "POST", Target: "/hook", Host: acct.endpoint + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Body: []byte("{}"), BodySize: 2, Complete: true}}
	for i := range answers {
		at := fmt.Sprintf("%s-a%d", id, i)
		events = append(events, domain.ForwardRequested{DeliveryID: id, AttemptID: at, EndpointID: acct.endpoint, Retry: i > 0},
			domain.ForwardResponded{DeliveryID: id, AttemptID: at, Status: 200 + i, Body: bytes.Repeat([]byte{'a'}, size),
				BodySize: int64(size), Captured: true, DurationMs: 1})
	}
	e.seed(t, domain.DeliveryStream(id), time.Now().Add(-time.Minute), events...)
}

// gqlError is an error of an answer, its path as text ("[delivery a3 2
// response]").
type gqlError struct {
	Message    string
	Path       []any
	Extensions struct{ Code string }
}

func (g gqlError) at() string { return fmt.Sprint(g.Path) }

// at is the value at path in an answer's data (nil when absent or null).
func at(data any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := data.(map[string]any)
			data = m[k]
		case int:
			l, _ := data.([]any)
			if k >= len(l) {
				return nil
			}
			data = l[k]
		}
	}
	return data
}

// TestStoredAnswersReadWithinTheAnswersLogBudget: the reads of stored
// requests and answers one answer makes (attempts' responses, attempt(id),
// a comparison's two sides, a delivery's request and latest answer) together read no
// more of the log than the answer's budget (Limits.AnswerLogBytes) and the
// one read that crossed it, however many aliases ask for them; the ones
// past it are null with an ANSWER_TOO_LARGE error at their path, and the
// rest of the answer is whole. Before, each alias made a read of its own,
// each within one read's bounds only: eight aliases of the attempts'
// responses read eight times what one does.
func TestStoredAnswersReadWithinTheAnswersLogBudget(t *testing.T) {
	const (
		budget  = 16 << 20
		answers = 6
		size    = 1 << 20 // 1.4 MB in base64: one read of the six is 8.4 MB
	)
	e := budgetEnv(t, budget)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
	seedAnswered(t, e, acct, "d1", answers, size)

	// post runs query and returns its data, its errors and the bytes of
	// the log the views read for it.
	post := func(t *testing.T, query string) (any, []gqlError, int64) {
		t.Helper()
		var resp *client.Response
		var err error
		read := e.viewsReads.bytesDuring(func() { resp, err = e.c.RawPost(query, acct.auth) })
		if err != nil {
			t.Fatal(err)
		}
		var errs []gqlError
		if len(resp.Errors) > 0 {
			if err := json.Unmarshal(resp.Errors, &errs); err != nil {
				t.Fatal(err)
			}
		}
		return resp.Data, errs, read
	}
	aliased := func(n int, alias func(k int) string) string {
		var b strings.Builder
		for k := range n {
			b.WriteString(alias(k) + " ")
		}
		return b.String()
	}
	// One answer's event: what attempt(id) reads alone.
	_, errs, event := post(t, `{ delivery(id: "d1") { attempt(id: "d1-a0") { response { status } } } }`)
	if len(errs) != 0 || event < size {
		t.Fatalf("one attempt's response read %d bytes of the log, errors %v", event, errs)
	}

	// A delivery whose request alone is 2 MiB (2.8 MB in base64): its
	// headers are read from its one event.
	e.seed(t, domain.DeliveryStream("big"), time.Now().Add(-time.Minute), domain.DeliveryReceived{DeliveryID: "big",
		Address: acct.endpoint, AddressKind: domain.AddressEndpoint, AccountID: acct.id, Method: "POST", Target: "/hook",
		Host: acct.endpoint + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Headers: []domain.Header{{Name: "Content-Type", Value: "text/plain"}},
		Body:    bytes.Repeat([]byte{'b'}, 2<<20), BodySize: 2 << 20, Complete: true})
	_, errs, request := post(t, `{ delivery(id: "big") { headers { name } } }`)
	if len(errs) != 0 || request < 2<<20 {
		t.Fatalf("one request read %d bytes of the log, errors %v", request, errs)
	}

	for _, tc := range []struct {
		name  string
		query string
		// slack is what the read that crossed the budget may have read
		// past it.
		slack int64
		// check looks at alias k's part of data: refused is whether it
		// is null for the budget, its errors' paths in want; ok false
		// when it is neither whole nor refused.
		check func(data any, k int) (refused bool, want []string, ok bool)
		n     int
	}{
		{name: "attempts' responses", n: 8,
			query: `{ delivery(id: "d1") { id ` + aliased(8, func(k int) string {
				return fmt.Sprintf("a%d: attempts { id response { status } }", k)
			}) + `} }`,
			slack: event,
			check: func(data any, k int) (bool, []string, bool) {
				alias := fmt.Sprintf("a%d", k)
				refused, want := false, []string(nil)
				for i := range answers {
					if at(data, "delivery", alias, i, "id") != fmt.Sprintf("d1-a%d", i) {
						return false, nil, false // the attempt itself is always read
					}
					switch r := at(data, "delivery", alias, i, "response"); {
					case r == nil:
						refused = true
						want = append(want, fmt.Sprint([]any{"delivery", alias, i, "response"}))
					case at(r, "status") != float64(200+i):
						return false, nil, false
					}
				}
				return refused, want, at(data, "delivery", "id") == "d1"
			}},
		{name: "attempt(id)", n: 16,
			query: `{ delivery(id: "d1") { id ` + aliased(16, func(k int) string {
				return fmt.Sprintf(`x%d: attempt(id: "d1-a%d") { id response { status } }`, k, k%answers)
			}) + `} }`,
			slack: event,
			check: func(data any, k int) (bool, []string, bool) {
				alias := fmt.Sprintf("x%d", k)
				if at(data, "delivery", alias, "id") != fmt.Sprintf("d1-a%d", k%answers) {
					return false, nil, false
				}
				if r := at(data, "delivery", alias, "response"); r != nil {
					return false, nil, at(r, "status") == float64(200+k%answers)
				}
				return true, []string{fmt.Sprint([]any{"delivery", alias, "response"})}, true
			}},
		{name: "compare", n: 8,
			query: `{ ` + aliased(8, func(k int) string {
				return fmt.Sprintf(`d%d: delivery(id: "d1") { id compare(a: "%d", b: "%d") { responseCompared } }`, k, k%answers+1, (k+1)%answers+1)
			}) + `}`,
			slack: event,
			check: func(data any, k int) (bool, []string, bool) {
				alias := fmt.Sprintf("d%d", k)
				if d := at(data, alias); d != nil { // compare is not null: its delivery is
					return false, nil, at(d, "id") == "d1" && at(d, "compare", "responseCompared") == true
				}
				return true, []string{fmt.Sprint([]any{alias, "compare"})}, true
			}},
		{name: "latest answer", n: 16,
			query: `{ ` + aliased(16, func(k int) string {
				return fmt.Sprintf(`d%d: delivery(id: "d1") { id responseHeaders { name } }`, k)
			}) + `}`,
			// Its one read reads the delivery's events from its request
			// to its latest answer, every answer between.
			slack: answers * event,
			check: func(data any, k int) (bool, []string, bool) {
				alias := fmt.Sprintf("d%d", k)
				if d := at(data, alias); d != nil {
					return false, nil, at(d, "id") == "d1"
				}
				return true, []string{fmt.Sprint([]any{alias})}, true
			}},
		{name: "requests", n: 16,
			query: `{ ` + aliased(16, func(k int) string {
				return fmt.Sprintf(`d%d: delivery(id: "big") { id headers { name } }`, k)
			}) + `}`,
			slack: request,
			check: func(data any, k int) (bool, []string, bool) {
				alias := fmt.Sprintf("d%d", k)
				if d := at(data, alias); d != nil {
					return false, nil, at(d, "id") == "big"
				}
				return true, []string{fmt.Sprint([]any{alias})}, true
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, errs, read := post(t, tc.query)
			t.Logf("%d aliases read %d bytes of the log (budget %d, one answer %d)", tc.n, read, budget, event)
			byPath := map[string]gqlError{}
			for _, g := range errs {
				byPath[g.at()] = g
			}
			refused := 0
			for k := range tc.n {
				isRefused, want, ok := tc.check(data, k)
				if !ok {
					t.Fatalf("alias %d is neither whole nor refused: %v", k, at(data))
				}
				if !isRefused {
					continue
				}
				refused++
				for _, p := range want {
					g, found := byPath[p]
					if !found || g.Extensions.Code != "ANSWER_TOO_LARGE" || !strings.Contains(g.Message, "budget of the log") {
						t.Errorf("alias %d refused without an ANSWER_TOO_LARGE error at %s naming the budget: %+v", k, p, g)
					}
					delete(byPath, p)
				}
			}
			if len(byPath) != 0 {
				t.Errorf("errors at no refused part: %v", byPath)
			}
			if refused == 0 {
				t.Errorf("no alias refused: the budget did not bound the answer")
			}
			if read > budget+tc.slack {
				t.Errorf("the answer read %d bytes of the log, past its budget of %d and the %d of the read that crossed it", read, budget, tc.slack)
			}
			if read < budget {
				t.Errorf("the answer read %d bytes of the log and refused %d aliases, under its budget of %d", read, refused, budget)
			}
		})
	}
}

// TestEachSubscriptionMessageHasItsOwnLogBudget: the budget of log bytes
// for stored answers is one message's, not the subscription's: a
// deliveries subscription whose every row's attempts' responses read most
// of the budget gets each row whole, although its messages together read
// several times the budget.
func TestEachSubscriptionMessageHasItsOwnLogBudget(t *testing.T) {
	const (
		budget     = 16 << 20
		answers    = 6
		size       = 1 << 20 // a row's responses read 8.4 MB of the log
		deliveries = 4
	)
	e := budgetEnv(t, budget)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
	for i := range deliveries {
		seedAnswered(t, e, acct, fmt.Sprintf("d%d", i), answers, size)
	}
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	type message struct {
		Data *struct {
			Deliveries struct {
				ID       string
				Attempts []struct {
					ID       string
					Response *struct{ Status int }
				}
			}
		}
		Errors []gqlError
	}
	var got []message
	read := e.viewsReads.bytesDuring(func() {
		d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
		c, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var ack struct{ Type string }
		if err := c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + acct.token}}); err != nil {
			t.Fatal(err)
		}
		if err := c.ReadJSON(&ack); err != nil || ack.Type != "connection_ack" {
			t.Fatalf("connection_init: %v %+v", err, ack)
		}
		// since "": every row of the address is replayed, one message each.
		if err := c.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
			"query":     `subscription($a: ID!) { deliveries(address: $a, since: "") { id attempts { id response { status } } } }`,
			"variables": map[string]any{"a": acct.endpoint}}}); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		for len(got) < deliveries {
			var m struct {
				Type    string
				Payload json.RawMessage
			}
			if err := c.ReadJSON(&m); err != nil {
				t.Fatalf("after %d messages: %v", len(got), err)
			}
			switch m.Type {
			case "ping":
				_ = c.WriteJSON(map[string]string{"type": "pong"})
			case "next":
				var msg message
				if err := json.Unmarshal(m.Payload, &msg); err != nil {
					t.Fatal(err)
				}
				got = append(got, msg)
			default:
				t.Fatalf("after %d messages: %s %s", len(got), m.Type, m.Payload)
			}
		}
	})
	t.Logf("%d messages read %d bytes of the log (budget %d a message)", len(got), read, budget)
	for i, m := range got {
		if len(m.Errors) != 0 || m.Data == nil {
			t.Errorf("message %d: errors %+v", i, m.Errors)
			continue
		}
		d := m.Data.Deliveries
		if len(d.Attempts) != answers {
			t.Errorf("message %d (%s): %d attempts, want %d", i, d.ID, len(d.Attempts), answers)
		}
		for j, a := range d.Attempts {
			if a.Response == nil || a.Response.Status != 200+j {
				t.Errorf("message %d (%s): attempt %s's response %+v, want status %d", i, d.ID, a.ID, a.Response, 200+j)
			}
		}
	}
	if read <= 2*budget {
		t.Errorf("the messages read %d bytes of the log, not past twice a message's budget of %d: the test shows nothing", read, budget)
	}
}

// logReaders records the stream reads of the log running at once (through
// streamReads.reading): the most that ran at once, and, while fewer than
// meet have met, each read waits for the others to come (1 s at most, then
// no read waits any more), so that reads that may run at once do.
type logReaders struct {
	running, most atomic.Int64
	meet          int
	mu            sync.Mutex
	arrived       int
	met           chan struct{}
}

func watchLogReaders(s *streamReads, meet int) *logReaders {
	r := &logReaders{meet: meet, met: make(chan struct{})}
	f := func() func() {
		now := r.running.Add(1)
		for most := r.most.Load(); now > most && !r.most.CompareAndSwap(most, now); most = r.most.Load() {
		}
		r.mu.Lock()
		r.arrived++
		if r.arrived == r.meet {
			close(r.met)
		}
		r.mu.Unlock()
		select {
		case <-r.met:
		case <-time.After(time.Second):
			r.mu.Lock()
			if r.arrived < r.meet {
				r.arrived = r.meet
				close(r.met)
			}
			r.mu.Unlock()
		}
		return func() { r.running.Add(-1) }
	}
	s.reading.Store(&f)
	return r
}

// seedRequests records n deliveries d<k> at acct's Endpoint, each a
// request of size bytes of body.
func seedRequests(t *testing.T, e *env, acct signedUpAccount, n, size int) {
	t.Helper()
	for k := range n {
		id := fmt.Sprintf("r%d", k)
		e.seed(t, domain.DeliveryStream(id), time.Now().Add(-time.Minute), domain.DeliveryReceived{DeliveryID: id,
			Address: acct.endpoint, AddressKind: domain.AddressEndpoint, AccountID: acct.id, Method: "POST", Target: "/hook",
			Host: acct.endpoint + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Body: bytes.Repeat([]byte{'b'}, size), BodySize: int64(size), Complete: true})
	}
}

// TestAPageOfBodiesReadsTheLogAtOnce: a page of deliveries whose bodies
// are selected reads its deliveries' requests from the log several at a
// time within the answer's log budget: each read reserves the bytes the
// views count of its delivery, and they fit in the budget together.
// Before, the reads under one budget ran one at a time: the most reads of
// the log running at once was 1.
func TestAPageOfBodiesReadsTheLogAtOnce(t *testing.T) {
	e := newEnv(t) // DefaultAnswerLogBytes
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	seedRequests(t, e, acct, 8, 64<<10)
	readers := watchLogReaders(e.viewsReads, 2)
	t.Cleanup(func() { e.viewsReads.reading.Store(nil) })
	resp, err := e.c.RawPost(`{ endpoint(id: "`+acct.endpoint+`") { deliveries(first: 8) { nodes { id body } } } }`, acct.auth)
	if err != nil || len(resp.Errors) != 0 {
		t.Fatalf("%v %s", err, resp.Errors)
	}
	nodes, _ := at(resp.Data, "endpoint", "deliveries", "nodes").([]any)
	if len(nodes) != 8 || len(at(nodes[0], "body").(string)) != 64<<10 {
		t.Fatalf("got %d deliveries", len(nodes))
	}
	if got := readers.most.Load(); got < 2 {
		t.Errorf("a page of 8 deliveries' bodies read the log %d read at a time, want several", got)
	}
}

// TestPagesReadAtOnceWithinTheAnswersLogBudget: aliases of a page of
// bodies, whose reads of the log run at once, together read no more of the
// log than the answer's budget and the one read that crossed it; the
// pages past it are null with ANSWER_TOO_LARGE.
func TestPagesReadAtOnceWithinTheAnswersLogBudget(t *testing.T) {
	const (
		budget  = 1 << 20
		size    = 64 << 10 // about 88 KB in base64: one read
		aliases = 8        // of pages of 8: 5.6 MB of the log asked for
	)
	e := budgetEnv(t, budget)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000"}`)
	seedRequests(t, e, acct, 8, size)
	one := e.viewsReads.bytesDuring(func() {
		if _, err := e.c.RawPost(`{ delivery(id: "r0") { body } }`, acct.auth); err != nil {
			t.Fatal(err)
		}
	})
	readers := watchLogReaders(e.viewsReads, 2)
	t.Cleanup(func() { e.viewsReads.reading.Store(nil) })
	var b strings.Builder
	b.WriteString("{ ")
	for k := range aliases {
		fmt.Fprintf(&b, `e%d: endpoint(id: "%s") { deliveries(first: 8) { nodes { id body } } } `, k, acct.endpoint)
	}
	b.WriteString("}")
	var resp *client.Response
	read := e.viewsReads.bytesDuring(func() {
		var err error
		if resp, err = e.c.RawPost(b.String(), acct.auth); err != nil {
			t.Fatal(err)
		}
	})
	var errs []gqlError
	if len(resp.Errors) > 0 {
		if err := json.Unmarshal(resp.Errors, &errs); err != nil {
			t.Fatal(err)
		}
	}
	whole, refused := 0, 0
	for k := range aliases {
		if nodes, _ := at(resp.Data, fmt.Sprintf("e%d", k), "deliveries", "nodes").([]any); len(nodes) == 8 {
			whole++
		} else {
			refused++
		}
	}
	t.Logf("%d aliases of a page of 8 read %d bytes of the log (budget %d, one read %d), %d at most at once: %d whole, %d refused",
		aliases, read, budget, one, readers.most.Load(), whole, refused)
	for _, g := range errs {
		if g.Extensions.Code != "ANSWER_TOO_LARGE" || !strings.Contains(g.Message, "budget of the log") {
			t.Errorf("an error other than the budget's: %+v", g)
		}
	}
	if refused == 0 || len(errs) == 0 {
		t.Errorf("no page refused: the budget did not bound the answer")
	}
	if read > budget+one {
		t.Errorf("the answer read %d bytes of the log, past its budget of %d and the %d of the read that crossed it", read, budget, one)
	}
	if read < budget {
		t.Errorf("the answer read %d bytes of the log, under its budget of %d", read, budget)
	}
	if readers.most.Load() < 2 {
		t.Errorf("the pages' reads of the log ran one at a time")
	}
}

// TestReadsLeaveRetriesEditsOut: between a delivery's request and its
// latest answer may be retries' edits, up to --max-body each, which the
// delivery's stored bytes (what a read reserves of the answer's budget) do
// not count. A read takes the request and the answer, not the events
// between them, so a page of such deliveries reads what it reserved and is
// answered whole within the budget. Before, each read took the edits along
// (2.8 MB for a delivery of 2-byte bodies); reserving only the stored
// bytes, a page of 8 read 8.4 MB under a 1 MiB budget, and running such
// reads alone still refused the page past its budget.
func TestReadsLeaveRetriesEditsOut(t *testing.T) {
	const (
		budget     = 1 << 20
		deliveries = 8
		edits      = 4
		editSize   = 512 << 10 // about 700 KB in base64
	)
	e := budgetEnv(t, budget)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
	for i := range deliveries {
		id := fmt.Sprintf("ed%d", i)
		events := []domain.Event{domain.DeliveryReceived{DeliveryID: id, Address: acct.endpoint, AddressKind: domain.AddressEndpoint,
			AccountID: acct.id, Method: "POST", Target: "/hook", Host: acct.endpoint + ".localhost", Proto: "HTTP/1.1",
			RemoteAddr: "127.0.0.1:1", Body: []byte("{}"), BodySize: 2, Complete: true}}
		for k := range edits {
			body := bytes.Repeat([]byte{'e'}, editSize)
			at := fmt.Sprintf("%s-a%d", id, k)
			events = append(events, domain.ForwardRequested{DeliveryID: id, AttemptID: at, EndpointID: acct.endpoint, Retry: k > 0,
				Edit: &domain.RequestEdit{Body: &body}})
		}
		last := fmt.Sprintf("%s-a%d", id, edits-1)
		events = append(events, domain.ForwardResponded{DeliveryID: id, AttemptID: last, Status: 200, Body: []byte("ok"),
			BodySize: 2, Captured: true, DurationMs: 1})
		e.seed(t, domain.DeliveryStream(id), time.Now().Add(-time.Minute), events...)
	}
	var one *client.Response
	oneRead := e.viewsReads.bytesDuring(func() {
		var err error
		if one, err = e.c.RawPost(`{ delivery(id: "ed0") { body responseBody } }`, acct.auth); err != nil {
			t.Fatal(err)
		}
	})
	if len(one.Errors) > 0 {
		t.Fatalf("one delivery: %v", one.Errors)
	}
	if oneRead >= editSize {
		t.Fatalf("one delivery's read took %d bytes of the log: its retries' edits along", oneRead)
	}
	var resp *client.Response
	query := fmt.Sprintf(`{ endpoint(id: "%s") { deliveries(first: %d) { nodes { id body responseBody } } } }`, acct.endpoint, deliveries)
	read := e.viewsReads.bytesDuring(func() {
		var err error
		if resp, err = e.c.RawPost(query, acct.auth); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("a page of %d deliveries, each with %d edits of %d bytes, read %d bytes of the log (budget %d); one delivery %d",
		deliveries, edits, editSize, read, budget, oneRead)
	if len(resp.Errors) > 0 {
		t.Errorf("the page was refused: %v", resp.Errors)
	}
	if read > deliveries*oneRead {
		t.Errorf("the page read %d bytes of the log, more than its %d deliveries' requests and answers (%d each)", read, deliveries, oneRead)
	}
}

// TestReadsReserveWhatTheQuerySelects: a delivery read for its request
// alone reserves of the answer's log budget its receipt's bytes, not its
// answers', and one read for its latest answer alone reserves and reads
// the answer, not the request. Under a 1 MiB budget, a page of the
// request bodies of 8 deliveries whose answers are 4 MiB is answered whole
// with its reads running at once, and a page of the answers of 8
// deliveries whose requests are 4 MiB is answered whole. Before, each read
// reserved the delivery's stored bytes: the first page's reads ran one at
// a time, each alone, for bytes none of them read; the second's read the
// requests along with the answers, and the page was refused past the
// first read.
func TestReadsReserveWhatTheQuerySelects(t *testing.T) {
	const (
		budget     = 1 << 20
		deliveries = 8
		large      = 4 << 20 // 5.6 MB in base64
	)
	// seed records deliveries <prefix><i>, each a request of request
	// bytes of body answered once with answer bytes of body.
	seed := func(t *testing.T, e *env, acct signedUpAccount, prefix string, request, answer int) {
		t.Helper()
		for i := range deliveries {
			id := fmt.Sprintf("%s%d", prefix, i)
			at := id + "-a0"
			e.seed(t, domain.DeliveryStream(id), time.Now().Add(-time.Minute),
				domain.DeliveryReceived{DeliveryID: id, Address: acct.endpoint, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
					Method: "POST", Target: "/hook", Host: acct.endpoint + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
					Body: bytes.Repeat([]byte{'q'}, request), BodySize: int64(request), Complete: true},
				domain.ForwardRequested{DeliveryID: id, AttemptID: at, EndpointID: acct.endpoint},
				domain.ForwardResponded{DeliveryID: id, AttemptID: at, Status: 200, Body: bytes.Repeat([]byte{'a'}, answer),
					BodySize: int64(answer), Captured: true, DurationMs: 1})
		}
	}
	// page posts a page of the endpoint's deliveries with fields, and
	// returns its nodes, its errors and the bytes of the log it read.
	page := func(t *testing.T, e *env, acct signedUpAccount, fields string) ([]any, []gqlError, int64) {
		t.Helper()
		var resp *client.Response
		read := e.viewsReads.bytesDuring(func() {
			var err error
			resp, err = e.c.RawPost(fmt.Sprintf(`{ endpoint(id: "%s") { deliveries(first: %d) { nodes { id %s } } } }`,
				acct.endpoint, deliveries, fields), acct.auth)
			if err != nil {
				t.Fatal(err)
			}
		})
		var errs []gqlError
		if len(resp.Errors) > 0 {
			if err := json.Unmarshal(resp.Errors, &errs); err != nil {
				t.Fatal(err)
			}
		}
		nodes, _ := at(resp.Data, "endpoint", "deliveries", "nodes").([]any)
		return nodes, errs, read
	}

	t.Run("request alone", func(t *testing.T) {
		e := budgetEnv(t, budget)
		acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
		seed(t, e, acct, "q", 2, large)
		readers := watchLogReaders(e.viewsReads, 2)
		t.Cleanup(func() { e.viewsReads.reading.Store(nil) })
		nodes, errs, read := page(t, e, acct, "body")
		t.Logf("a page of %d request bodies of deliveries with %d-byte answers read %d bytes of the log (budget %d), %d reads at most at once",
			deliveries, large, read, budget, readers.most.Load())
		if len(errs) != 0 || len(nodes) != deliveries {
			t.Fatalf("the page has %d deliveries, errors %+v", len(nodes), errs)
		}
		for i, n := range nodes {
			if at(n, "body") != "qq" {
				t.Errorf("delivery %d: body %v", i, at(n, "body"))
			}
		}
		if read >= budget {
			t.Errorf("the page read %d bytes of the log: the answers along", read)
		}
		if got := readers.most.Load(); got < 2 {
			t.Errorf("the page's reads of the log ran %d at a time: each reserved its delivery's answers", got)
		}
	})

	t.Run("answer alone", func(t *testing.T) {
		e := budgetEnv(t, budget)
		acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
		seed(t, e, acct, "r", large, 2)
		readers := watchLogReaders(e.viewsReads, 2)
		t.Cleanup(func() { e.viewsReads.reading.Store(nil) })
		nodes, errs, read := page(t, e, acct, "responseBody responseHeaders { name }")
		t.Logf("a page of %d answers of deliveries with %d-byte requests read %d bytes of the log (budget %d), %d reads at most at once",
			deliveries, large, read, budget, readers.most.Load())
		if len(errs) != 0 || len(nodes) != deliveries {
			t.Fatalf("the page has %d deliveries, errors %+v", len(nodes), errs)
		}
		for i, n := range nodes {
			if at(n, "responseBody") != "aa" {
				t.Errorf("delivery %d: responseBody %v", i, at(n, "responseBody"))
			}
		}
		if read >= budget {
			t.Errorf("the page read %d bytes of the log: the requests along", read)
		}
		if got := readers.most.Load(); got < 2 {
			t.Errorf("the page's reads of the log ran %d at a time", got)
		}
	})

	t.Run("both", func(t *testing.T) {
		// Either large, both read: the budget holds the page to what it
		// reserved, the first read alone and the rest refused.
		e := budgetEnv(t, budget)
		acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
		seed(t, e, acct, "s", 2, large)
		nodes, errs, read := page(t, e, acct, "body responseBody")
		if len(nodes) == deliveries || len(errs) == 0 || errs[0].Extensions.Code != "ANSWER_TOO_LARGE" {
			t.Errorf("a page of %d requests with their %d-byte answers under a budget of %d: %d deliveries, errors %+v",
				deliveries, large, budget, len(nodes), errs)
		}
		if read > budget+large*2 {
			t.Errorf("the page read %d bytes of the log, past its budget and one read", read)
		}
	})
}
