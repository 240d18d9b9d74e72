package systemtest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// The GraphQL API's limits, each shown against the real binary: what an
// anonymous or free client sends must not cost the relay more than the
// limits allow.

// peakRSSKiB reads the relay's VmHWM.
func peakRSSKiB(t *testing.T, r *harness.Relay) int {
	t.Helper()
	n, err := harness.ProcPeakRSSKiB(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// apiPost sends a POST of size bytes to /graphql over a raw connection,
// with a declared length or chunked, writing the body while it reads the
// answer: a relay that answers early is not waited for.
func apiPost(t *testing.T, r *harness.Relay, size int, chunked bool) harness.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	head := "POST /graphql HTTP/1.1\r\nHost: localhost:" + strconv.Itoa(r.Port) + "\r\nContent-Type: application/json\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += "Content-Length: " + strconv.Itoa(size) + "\r\n\r\n"
	}
	go func() {
		// A valid JSON body: a relay without a limit reads all of it.
		prefix, suffix := []byte(`{"query":"{ __typename }","pad":"`), []byte(`"}`)
		pad := bytes.Repeat([]byte("a"), 64<<10)
		w := bufio.NewWriterSize(conn, 128<<10)
		w.WriteString(head)
		write := func(p []byte) {
			if chunked {
				fmt.Fprintf(w, "%x\r\n%s\r\n", len(p), p)
			} else {
				w.Write(p)
			}
		}
		write(prefix)
		for left := size - len(prefix) - len(suffix); left > 0; left -= len(pad) {
			write(pad[:min(left, len(pad))])
		}
		write(suffix)
		if chunked {
			w.WriteString("0\r\n\r\n")
		}
		w.Flush() // errors ignored: the relay may close once it answered
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodPost})
	if err != nil {
		t.Fatalf("POST of %d bytes: %v", size, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return harness.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// gqlErrors decodes the errors of an answer.
func gqlErrors(t *testing.T, body []byte) harness.GQLResult {
	t.Helper()
	var res harness.GQLResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("answer is no GraphQL result: %v: %.300s", err, body)
	}
	return res
}

// TestAPIBodyLimit: a 50 MB POST, declared or chunked, is answered 413
// with a GraphQL error, and the relay never holds it: its peak RSS grows
// by far less than the body.
func TestAPIBodyLimit(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	before := peakRSSKiB(t, r)
	for _, chunked := range []bool{false, true} {
		resp := apiPost(t, r, 50<<20, chunked)
		res := gqlErrors(t, resp.Body)
		if resp.Status != http.StatusRequestEntityTooLarge || len(res.Errors) == 0 || res.Errors[0].Code() != "REQUEST_TOO_LARGE" {
			t.Errorf("50 MB POST (chunked %v): %d %s, want 413 REQUEST_TOO_LARGE", chunked, resp.Status, resp.Body)
		}
	}
	// The relay still answers, and its peak grew by less than 16 MiB
	// (without the limit gqlgen reads, copies and decodes all 50 MB).
	var out struct {
		Typename string `json:"__typename"`
	}
	r.MustGraphQL(t, "", `{ __typename }`, nil, &out)
	if grew := peakRSSKiB(t, r) - before; grew > 16<<10 {
		t.Errorf("peak RSS grew by %d MiB over two 50 MB requests, want < 16 MiB", grew>>10)
	}
	if resp := apiPost(t, r, 900<<10, false); resp.Status != http.StatusOK {
		t.Errorf("900 KiB POST under the limit: %d %.200s", resp.Status, resp.Body)
	}
}

// TestAPIBodyLimitFlag: --max-api-body bounds POST bodies and GET query
// strings alike.
func TestAPIBodyLimitFlag(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", "--max-api-body", "8KiB")
	long := "{ __typename " + strings.Repeat(" ", 10<<10) + "}"
	get := func(q string) harness.Response {
		return r.SendRaw(t, harness.RawRequest{Method: "GET", Target: "/graphql?query=" + q, Host: "localhost:" + strconv.Itoa(r.Port)})
	}
	if resp := get(strings.ReplaceAll(long, " ", "+")); resp.Status != http.StatusRequestEntityTooLarge || gqlErrors(t, resp.Body).Errors[0].Code() != "REQUEST_TOO_LARGE" {
		t.Errorf("GET with a 10 KiB query string: %d %s, want 413", resp.Status, resp.Body)
	}
	if resp := get("%7B__typename%7D"); resp.Status != http.StatusOK {
		t.Errorf("GET with a small query: %d %s", resp.Status, resp.Body)
	}
	if resp := apiPost(t, r, 10<<10, true); resp.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("10 KiB POST over an 8 KiB limit: %d %s, want 413", resp.Status, resp.Body)
	}
}

// TestAPIQueryCost: pages, aliases, fields and mutations have a cost; an
// operation over the budget is refused before it runs (no data at all),
// while what the console and the agent ask stays within it.
func TestAPIQueryCost(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	body := bytes.Repeat([]byte("b"), 256<<10) // a full capture each
	const rows = 20
	for i := 0; i < rows; i++ {
		send(t, r, id, "POST", "/big/"+strconv.Itoa(i), nil, body)
	}
	var page struct {
		Inspector struct {
			Deliveries struct{ Nodes []struct{ ID string } }
		}
	}
	harness.Eventually(t, 10*time.Second, "the history to hold every delivery", func() bool {
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries(first: 100){ nodes{ id } } } }`, map[string]any{"id": id}, &page)
		return len(page.Inspector.Deliveries.Nodes) == rows
	})
	deliveryID := page.Inspector.Deliveries.Nodes[0].ID
	tenant := signUpTenant(t, r, "free")

	// 16 rows of payloads: within the default budget.
	payloadPage := `a%d: inspector(id: $id){ deliveries(first: 16){ nodes{ body bodyBase64 } } } `
	aliases := func(n int, f string) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, f, i)
		}
		return b.String()
	}
	// Fragments nested four deep, each spreading the next ten times:
	// 10 000 fields from a document of a few hundred tokens.
	bomb := `{ ...A } fragment A on Query { ` + aliases(10, "a%d: inspector(id: $id){ ...B } ") + `}
		fragment B on Inspector { ` + aliases(10, "b%d: deliveries{ ...C } ") + `}
		fragment C on DeliveryConnection { ` + aliases(10, "c%d: nodes{ ...D } ") + `}
		fragment D on Delivery { ` + aliases(10, "d%d: id ") + `}`
	// Refused first: the peak RSS across them shows that none ran.
	refused := []struct{ name, token, query string }{
		{"40 pages of the log by a free account", tenant.Token, `{ __typename ` +
			aliases(40, `e%d: events(first: 1000){ nodes{ id type stream data } } `) + `}`},
		{"600 fields through repeated spreads", "", `{ ...F ...F ...F ...F ...F ...F } fragment F on Query { ` + aliases(100, "t%d: __typename ") + `}`},
		{"fragment bomb", "", strings.Replace(bomb, "{ ...A }", "query($id: ID!){ ...A }", 1)},
		{"eleven writes", "", `mutation{ ` + aliases(11, "i%d: createInspector{ id } ") + `}`},
	}
	allowed := []struct{ name, query string }{
		{"console history page", `query($id: ID!, $first: Int, $after: String){ inspector(id: $id){ id deliveries(first: $first, after: $after){
			edges{ cursor node{ id cursor address method path bodySize complete receivedAt responseStatus attempts{ id status startedAt durationMs error retry } } }
			pageInfo{ hasNextPage endCursor } } } }`},
		{"console delivery detail", `query($d: ID!){ delivery(id: $d){ id cursor address method path bodySize complete receivedAt responseStatus
			attempts{ id status startedAt durationMs error retry } headers{ name value } body bodyBase64 responseHeaders{ name value } responseBody } }`},
		{"one page of payloads", `query($id: ID!){ ` + aliases(1, payloadPage) + `}`},
		{"a page of 100 payloads (20 rows here)", `query($id: ID!){ inspector(id: $id){ deliveries(first: 100){ nodes{ body bodyBase64 } } } }`},
		{"a page of 100000 costs a page of 100", `query($id: ID!){ inspector(id: $id){ deliveries(first: 100000){ nodes{ id bodySize } } } }`},
	}
	vars := func(query string) map[string]any {
		v := map[string]any{}
		for name, value := range map[string]any{"id": id, "d": deliveryID, "first": 50} {
			if strings.Contains(query, "$"+name) {
				v[name] = value
			}
		}
		return v
	}
	before := peakRSSKiB(t, r)
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			res := r.GraphQL(t, tt.token, tt.query, vars(tt.query))
			switch {
			case len(res.Errors) == 0 || res.Errors[0].Code() != "QUERY_TOO_COMPLEX":
				t.Fatalf("errors %+v, want QUERY_TOO_COMPLEX", res.Errors)
			case len(res.Data) > 0 && string(res.Data) != "null":
				t.Fatalf("refused operation still answered data: %.200s", res.Data)
			}
		})
	}
	if grew := peakRSSKiB(t, r) - before; grew > 32<<10 {
		t.Errorf("peak RSS grew by %d MiB over refused operations, want < 32 MiB", grew>>10)
	}
	// Pages of payloads are priced by the work of reading them, so six
	// aliased pages of 16 full rows (96 × 600 KiB as JSON) are within the
	// cost budget, as the default page with every field must be; what bounds
	// them is the answer's size (--max-api-answer): its fields past 32 MiB
	// are refused, and the answer does not grow to 57 MiB.
	before = peakRSSKiB(t, r)
	t.Run("six pages of payloads", func(t *testing.T) {
		q := `query($id: ID!){ ` + aliases(6, payloadPage) + `}`
		res := r.GraphQL(t, "", q, vars(q))
		if len(res.Errors) == 0 || res.Errors[0].Code() != "ANSWER_TOO_LARGE" {
			t.Fatalf("errors %.300v, want ANSWER_TOO_LARGE", res.Errors)
		}
		if len(res.Data) > 40<<20 {
			t.Errorf("answered %d bytes of data, want it cut near 32 MiB", len(res.Data))
		}
	})
	if grew := peakRSSKiB(t, r) - before; grew > 160<<10 {
		t.Errorf("peak RSS grew by %d MiB over an answer cut at 32 MiB, want < 160 MiB", grew>>10)
	}
	for _, tt := range allowed {
		t.Run(tt.name, func(t *testing.T) {
			if res := r.GraphQL(t, "", tt.query, vars(tt.query)); len(res.Errors) > 0 {
				t.Fatalf("refused: %+v", res.Errors)
			}
		})
	}
}

// TestAPITokenLimit: a document of 20 000 fields (220 KB) is refused by
// the token limit before validation, whose cost grows with the square of
// the fields, spends the relay's CPU.
func TestAPITokenLimit(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	query := "{" + strings.Repeat(" __typename", 20_000) + " }"
	cpu0, err := harness.ProcCPU(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	res := r.GraphQL(t, "", query, nil)
	cpu, err := harness.ProcCPU(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Message, "token limit") {
		t.Errorf("20 000 fields: %.300s, want a token limit error", res.String())
	}
	if used := cpu - cpu0; used > time.Second {
		t.Errorf("the relay spent %s of CPU on one 220 KB document, want < 1s", used)
	}
}

// TestAPIPersistedQueriesBounded: large persisted queries run but are not
// kept (asking for them by hash finds nothing), small ones are.
func TestAPIPersistedQueriesBounded(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	persisted := func(query string, send bool) harness.GQLResult {
		sum := sha256.Sum256([]byte(query))
		body := map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}}
		if send {
			body["query"] = query
		}
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		resp, err := harness.Client.Do(r.Route(req))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return gqlErrors(t, b)
	}
	small := "{ __typename }"
	if res := persisted(small, true); len(res.Errors) > 0 {
		t.Fatalf("register a small query: %+v", res.Errors)
	}
	if res := persisted(small, false); len(res.Errors) > 0 {
		t.Errorf("a small persisted query is not kept: %+v", res.Errors)
	}
	// Ten 512 KiB documents (a comment pads them): each runs once.
	var large []string
	for i := 0; i < 10; i++ {
		q := fmt.Sprintf("# %d %s\n{ __typename }", i, strings.Repeat("p", 512<<10))
		if res := persisted(q, true); len(res.Errors) > 0 {
			t.Fatalf("register a large query: %+v", res.Errors)
		}
		large = append(large, q)
	}
	for i, q := range large {
		if res := persisted(q, false); len(res.Errors) == 0 || res.Errors[0].Code() != "PERSISTED_QUERY_NOT_FOUND" {
			t.Errorf("large persisted query %d asked by hash: %.200s, want PERSISTED_QUERY_NOT_FOUND", i, res.String())
		}
	}
}

// TestAPIErrorsDoNotEchoRequests: error messages never carry the request
// back: neither a body that does not decode nor a long name in a query.
func TestAPIErrorsDoNotEchoRequests(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	const marker = "SECRET_MARKER"
	long := strings.Repeat("x", 300) + marker
	tests := []struct{ name, body string }{
		{"body that does not decode", `{"query": "{ __typename }", "token": "` + long + `", `},
		{"unknown field with a long name", `{"query": "{ ` + long + ` }"}`},
		{"unknown operation with a long name", `{"query": "{ __typename }", "operationName": "` + long + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := harness.Client.Do(r.Route(req))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if res := gqlErrors(t, b); len(res.Errors) == 0 {
				t.Fatalf("no error for %s: %s", tt.name, b)
			}
			if bytes.Contains(b, []byte(marker)) {
				t.Errorf("answer quotes the request: %s", b)
			}
		})
	}
}

// TestAPIMultipartRefused: the schema takes no uploads, so a multipart
// request is a clean client error, not a recovered panic.
func TestAPIMultipartRefused(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	body := "--b\r\nContent-Disposition: form-data; name=\"operations\"\r\n\r\n{\"query\":\"{ __typename }\",\"variables\":{\"f\":null}}\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"map\"\r\n\r\n{\"0\":[\"variables.f\"]}\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"0\"; filename=\"a.txt\"\r\n\r\nhello\r\n--b--\r\n"
	resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/graphql", Host: "localhost:" + strconv.Itoa(r.Port),
		Headers: [][2]string{{"Content-Type", "multipart/form-data; boundary=b"}}, Body: []byte(body)})
	if resp.Status < 400 || resp.Status >= 500 {
		t.Errorf("multipart POST: %d %s, want a 4xx", resp.Status, resp.Body)
	}
	if strings.Contains(r.Output(), "graphql panic") {
		t.Errorf("multipart POST panicked:\n%s", r.Output())
	}
}
