package graph_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/internal/testwait"
)

// TestAnswersHeapStaysWithinTheBudget: --api-answer-budget bounds the heap
// the answers in flight take, not only their encoded bytes. 24 clients ask
// at once for a page of 8 stored bodies of 256 KiB (the default capture
// cap) and read nothing of their answers until every one has begun, so
// each answer admitted stays held while it is written. The heap sampled
// while the pages were read and built must stay within 2¼ times the
// budget: the answers' live heap within the budget, as much again of
// garbage between two collections (GOGC=100, set here), and a quarter for
// the collector's lag on a loaded machine under -race (94–108 MiB seen
// there, 69–87 MiB without it). Every request is
// answered, whole or refused UNAVAILABLE. Before the budget counted the
// heap (answersize.HeapPerByte) and a page's bodies before they were read,
// the heap grew by 171–175 MiB with a budget of 64 MiB. A page is
// admitted with the heap its fields will take reserved (Meter.Reserve):
// admitted for its stored bodies alone, 8 pages were admitted at once and
// 5–6 of them refused after reading their bodies (at times all 8, and no
// page answered whole), the heap up 58–81 MiB under -race; now 2–3 are
// admitted and answered, and it is up 30–38 MiB.
func TestAnswersHeapStaysWithinTheBudget(t *testing.T) {
	const (
		budget  = 64 << 20
		clients = 24
		rows    = 8
	)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	h, token, endpoint, _ := largePages(t, budget, rows)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()

	for _, tc := range []struct{ name, fields string }{
		{"body and bodyBase64", "body bodyBase64"},
		{"bodyBase64", "bodyBase64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := json.Marshal(map[string]any{
				"query":     fmt.Sprintf(`query($id: ID!){ endpoint(id: $id){ deliveries(first: %d){ nodes { %s } } } }`, rows, tc.fields),
				"variables": map[string]any{"id": endpoint},
			})
			if err != nil {
				t.Fatal(err)
			}
			held, peak, answers := stalledPages(t, srv.Listener.Addr().String(), token, q, clients, nil)
			whole, refused := 0, 0
			for _, a := range answers {
				switch {
				case len(a.Errors) == 0 && len(a.Data.Endpoint.Deliveries.Nodes) == rows:
					whole++
				case len(a.Errors) > 0 && a.Errors[0].Extensions.Code == "UNAVAILABLE":
					refused++
				default:
					t.Errorf("an answer neither whole nor refused UNAVAILABLE: %d rows, errors %v", len(a.Data.Endpoint.Deliveries.Nodes), a.Errors)
				}
			}
			t.Logf("%d pages at once with a budget of %d MiB: %d whole, %d refused; held %d MiB once built, peak +%d MiB",
				clients, budget>>20, whole, refused, held>>20, peak>>20)
			if whole == 0 {
				t.Errorf("no page answered whole with a budget of %d MiB", budget>>20)
			}
			if held > budget {
				t.Errorf("answers held %d MiB of heap while written, want at most the budget, %d MiB", held>>20, budget>>20)
			}
			if most := int64(9 * budget / 4); peak > most {
				t.Errorf("the heap grew by %d MiB while the answers were read and built, want at most %d MiB (2¼ times the budget)", peak>>20, most>>20)
			}
		})
	}
}

// TestOneCallerHoldsPartOfTheAnswerBudget: an account whose answers are
// being written slowly (here, not read at all: each page of a stored body
// of 256 KiB, 0.77 MiB of heap counted, held in Write) holds at most its
// share of --api-answer-budget, so another account's ordinary page of one
// body is still answered. Before the budget had shares, 100 such pages of
// one account took the whole budget and the other account's page was
// refused UNAVAILABLE while they were held.
func TestOneCallerHoldsPartOfTheAnswerBudget(t *testing.T) {
	const (
		budget    = 64 << 20
		maxAnswer = 4 << 20 // a caller's share is then a quarter, 16 MiB
		stalled   = 100
	)
	var res *graph.Resolver
	e := newEnvWith(t, nil, func(r *graph.Resolver) { res = r })
	h := graph.NewHandler(res, graph.ServerOptions{Limits: graph.Limits{AnswerBudget: budget, MaxAnswer: maxAnswer}})
	heavy, heavyEndpoint := e.accountWithBodies(t, 1)
	other, otherEndpoint := e.accountWithBodies(t, 1)
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()

	page := `query($id: ID!){ endpoint(id: $id){ deliveries(first: 1){ nodes { body } } } }`
	q, err := json.Marshal(map[string]any{"query": page, "variables": map[string]any{"id": heavyEndpoint}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		otherErr   error
		otherRows  int
		otherReply struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ Body string } }
			}
		}
	)
	_, _, answers := stalledPages(t, srv.Listener.Addr().String(), heavy, q, stalled, func() {
		otherErr = client.New(h).Post(page, &otherReply, client.Var("id", otherEndpoint), client.AddHeader("Authorization", "Bearer "+other))
		otherRows = len(otherReply.Endpoint.Deliveries.Nodes)
	})
	whole, refused := tally(answers, "")
	t.Logf("one account's %d stalled pages: %d admitted, %d refused; the other account's page: %d rows, %v", stalled, whole, refused, otherRows, otherErr)
	if otherErr != nil || otherRows != 1 || len(otherReply.Endpoint.Deliveries.Nodes[0].Body) != graph.DefaultCaptureCap {
		t.Errorf("another account's page of one body while one account's answers were held: %d rows, %v; want it answered", otherRows, otherErr)
	}
	if whole == 0 || refused == 0 {
		t.Errorf("%d of the heavy account's pages admitted, %d refused; want some of each (its share)", whole, refused)
	}
}

// TestRefusedPagesReadNoBodies: a page of payloads is counted against the
// answers' budget from the sizes the views hold before its bodies are read
// from the log, so a page the budget refuses reads none of them (before,
// it read all 16 and was refused after).
func TestRefusedPagesReadNoBodies(t *testing.T) {
	const rows = 16
	for _, tc := range []struct {
		name   string
		budget int64
		reads  int
		code   string
	}{
		{"refused", 4 << 20, 0, "UNAVAILABLE"},
		{"admitted", 64 << 20, rows, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, token, endpoint, e := largePages(t, tc.budget, rows)
			var out struct {
				Endpoint struct {
					Deliveries struct{ Nodes []struct{ Body string } }
				}
			}
			var err error
			reads := e.viewsReads.during(func() {
				err = client.New(h).Post(fmt.Sprintf(`query($id: ID!){ endpoint(id: $id){ deliveries(first: %d){ nodes { body } } } }`, rows),
					&out, client.Var("id", endpoint), client.AddHeader("Authorization", "Bearer "+token))
			})
			if len(reads) != tc.reads {
				t.Errorf("the page read %d delivery streams from the log, want %d", len(reads), tc.reads)
			}
			if got := code(err); tc.code != "" && !strings.Contains(got, `"code":"`+tc.code+`"`) {
				t.Errorf("the page answered %v, want %s", err, tc.code)
			} else if tc.code == "" && (err != nil || len(out.Endpoint.Deliveries.Nodes) != rows) {
				t.Errorf("the page answered %d rows, %v; want %d", len(out.Endpoint.Deliveries.Nodes), err, rows)
			}
		})
	}
}

// largePages is an API over the real store whose answers share budget
// bytes of heap, and an account's Endpoint holding rows deliveries of a
// body of the default capture cap (256 KiB): the handler, the account's
// token, the Endpoint's id and the environment.
func largePages(t *testing.T, budget int64, rows int) (h http.Handler, token, endpoint string, e *env) {
	t.Helper()
	var res *graph.Resolver
	e = newEnvWith(t, nil, func(r *graph.Resolver) { res = r })
	h = graph.NewHandler(res, graph.ServerOptions{Limits: graph.Limits{AnswerBudget: budget}})
	token, endpoint = e.accountWithBodies(t, rows)
	return h, token, endpoint, e
}

// TestOneNetworkHoldsPartOfTheAnswerBudget: anonymous callers of one
// client network (here 16 loopback addresses of 127.0.0.0/24), each within
// its own share, hold at most half of the answer budget together, twice
// what one caller may, and a caller of another network still gets its
// page. With the network's share lifted they held three quarters (31
// pages, one caller 10), the reserve alone left for everyone else.
func TestOneNetworkHoldsPartOfTheAnswerBudget(t *testing.T) {
	const (
		budget    = 64 << 20
		maxAnswer = 4 << 20 // a caller's share is a quarter, a network's half
		callers   = 16
		stalled   = 8 * callers
	)
	var res *graph.Resolver
	e := newEnvWith(t, nil, func(r *graph.Resolver) { res = r })
	h := graph.NewHandler(res, graph.ServerOptions{Limits: graph.Limits{AnswerBudget: budget, MaxAnswer: maxAnswer}})
	var created struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &created)
	inspector := created.CreateInspector.ID
	body := make([]byte, graph.DefaultCaptureCap)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	e.seed(t, domain.DeliveryStream("d-guest-big"), time.Now(), domain.DeliveryReceived{DeliveryID: "d-guest-big", Address: inspector,
		AddressKind: domain.AddressInspector, Method: "POST", Target: "/", Host: "h",
		Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Body: body, BodySize: int64(len(body)), Complete: true})
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallSendBuffers{srv.Listener}
	srv.Start()
	defer srv.Close()

	// The alias gives the answer the shape stalledPages decodes.
	page := `query($id: ID!){ endpoint: inspector(id: $id){ deliveries(first: 1){ nodes { body } } } }`
	q, err := json.Marshal(map[string]any{"query": page, "variables": map[string]any{"id": inspector}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		otherErr   error
		otherReply struct {
			Endpoint struct {
				Deliveries struct{ Nodes []struct{ Body string } }
			}
		}
	)
	// First one caller alone: the pages its quarter admits.
	_, _, alone := stalledPagesFrom(t, srv.Listener.Addr().String(), "", q, 2*callers, func(int) net.IP { return net.IPv4(127, 0, 0, 9) }, nil)
	oneCaller, _ := tally(alone, "")

	from := func(i int) net.IP { return net.IPv4(127, 0, 0, byte(10+i%callers)) }
	_, _, answers := stalledPagesFrom(t, srv.Listener.Addr().String(), "", q, stalled, from, func() {
		// httptest's requests come from 192.0.2.1: another network.
		otherErr = client.New(h).Post(page, &otherReply, client.Var("id", inspector))
	})
	whole, refused := tally(answers, "")
	_, byNetwork := tally(answers, "client network")
	t.Logf("one caller alone: %d pages admitted; %d stalled pages of %d callers of one /24: %d admitted, %d refused (%d naming the network's share); another network's page: %v",
		oneCaller, stalled, callers, whole, refused, byNetwork, otherErr)
	if otherErr != nil || len(otherReply.Endpoint.Deliveries.Nodes) != 1 || len(otherReply.Endpoint.Deliveries.Nodes[0].Body) != graph.DefaultCaptureCap {
		t.Errorf("another network's page while one network's answers were held: %v; want it answered", otherErr)
	}
	if whole == 0 || byNetwork == 0 {
		t.Errorf("%d of the network's pages admitted, %d refused naming its share; want some of each", whole, byNetwork)
	}
	// The network's half is two callers' quarters (a page of chunking
	// either way).
	if oneCaller == 0 || whole > 2*oneCaller+2 {
		t.Errorf("the network's callers held %d pages, one caller alone %d: want at most %d, the network's half", whole, oneCaller, 2*oneCaller+2)
	}
}

// tally counts the pages answered whole (one row) and those refused
// UNAVAILABLE whose words hold naming ("" for any).
func tally(answers []pageAnswer, naming string) (whole, refused int) {
	for _, a := range answers {
		switch {
		case len(a.Errors) == 0 && len(a.Data.Endpoint.Deliveries.Nodes) == 1:
			whole++
		case len(a.Errors) > 0 && a.Errors[0].Extensions.Code == "UNAVAILABLE" && strings.Contains(a.Errors[0].Message, naming):
			refused++
		}
	}
	return whole, refused
}

// accountWithBodies signs up an account with an Endpoint holding rows
// deliveries of a stored body of graph.DefaultCaptureCap bytes.
func (e *env) accountWithBodies(t *testing.T, rows int) (token, endpoint string) {
	t.Helper()
	acct := e.accountWithEndpoint(t, `{name: "big", mode: LOG}`)
	body := make([]byte, graph.DefaultCaptureCap)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for i := range rows {
		id := fmt.Sprintf("d-%s-%02d", acct.id, i)
		e.seed(t, domain.DeliveryStream(id), time.Now(), domain.DeliveryReceived{DeliveryID: id, Address: acct.endpoint,
			AddressKind: domain.AddressEndpoint, AccountID: acct.id, Method: "POST", Target: "/", Host: "h",
			Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Body: body, BodySize: int64(len(body)), Complete: true})
	}
	return acct.token, acct.endpoint
}

// pageAnswer is what stalledPages decodes of each answer.
type pageAnswer struct {
	Data struct {
		Endpoint struct {
			Deliveries struct{ Nodes []json.RawMessage }
		}
	}
	Errors []struct {
		Message    string
		Extensions struct{ Code string }
	}
}

// stalledPages posts body to the API at addr from n connections at once,
// each reading only the head of its answer until all n have begun, and
// returns the heap the answers held then (after one collection) and the
// peak heap sampled while they were built, both above the heap before
// the first request, and the answers, read whole after. while, when not
// nil, runs once all n have begun, before any is read further.
func stalledPages(t *testing.T, addr, token string, body []byte, n int, while func()) (held, peak int64, answers []pageAnswer) {
	t.Helper()
	return stalledPagesFrom(t, addr, token, body, n, nil, while)
}

// stalledPagesFrom is stalledPages with request i sent from the local
// address from(i) (any loopback address when from is nil).
func stalledPagesFrom(t *testing.T, addr, token string, body []byte, n int, from func(i int) net.IP, while func()) (held, peak int64, answers []pageAnswer) {
	t.Helper()
	base := heapObjects(true)
	stopSampling := make(chan struct{})
	sampled := make(chan int64)
	go func() {
		most := base
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				sampled <- most
				return
			case <-tick.C:
				most = max(most, heapObjects(false))
			}
		}
	}()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); cerr != nil {
			return cerr
		}
		return err
	}}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		begun   int
		release = make(chan struct{})
	)
	answers = make([]pageAnswer, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dialer := dialer
			if from != nil {
				dialer.LocalAddr = &net.TCPAddr{IP: from(i)}
			}
			conn, err := dialer.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			auth := ""
			if token != "" {
				auth = "Authorization: Bearer " + token + "\r\n"
			}
			req := "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + auth +
				"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)
			if _, err := io.WriteString(conn, req); err != nil {
				t.Error(err)
				return
			}
			resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
			mu.Lock()
			begun++
			mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			<-release
			if err := json.NewDecoder(resp.Body).Decode(&answers[i]); err != nil {
				t.Errorf("answer %d: %s: %v", i, resp.Status, err)
			}
		}()
	}
	testwait.CheckFor(t, 5*time.Minute, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if begun < n {
			return fmt.Errorf("%d of %d answers begun", begun, n)
		}
		return nil
	})
	close(stopSampling)
	peak = <-sampled - base
	held = heapObjects(true) - base
	if while != nil {
		while()
	}
	close(release)
	wg.Wait()
	return held, peak, answers
}

// heapObjects is the heap's objects, garbage not yet swept included;
// after two collections when collect is set (the second empties the
// pools' victim caches).
func heapObjects(collect bool) int64 {
	if collect {
		runtime.GC()
		runtime.GC()
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// smallSendBuffers gives every accepted connection a send buffer of 16 KiB,
// so an answer the client does not read holds its handler in Write after
// a few KiB instead of after the kernel's few MiB.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(16 << 10); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, err
}
