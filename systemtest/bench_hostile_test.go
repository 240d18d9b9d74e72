package systemtest

// BenchmarkHostile runs each attack on the relay's defaults for a bounded
// time while a legitimate client sends deliveries and GraphQL queries, and
// reports what the legitimate client saw and the relay's peak memory.
// docs/security.md has the command and the figures.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/systemtest/harness"
)

const (
	// hostileFor is how long each attack runs.
	hostileFor = 10 * time.Second
	// attackerIP is where every attack comes from; the legitimate client
	// uses 127.0.0.1. Linux routes all of 127/8 to loopback.
	attackerIP = "127.0.0.2"
)

// hostileEnv is what an attack may use: the relay, an inspector and a PROXY
// Endpoint of the attacker's own, and an account token.
type hostileEnv struct {
	r          *harness.Relay
	inspector  string
	inspectors []string // more of the attacker's, when the attack's setup makes them
	endpoint   string
	token      string
}

type hostileAttack struct {
	name string
	// setup prepares what the attack needs before it starts (not timed).
	setup func(b *testing.B, e *hostileEnv)
	// run attacks until ctx ends and returns how many attack operations it made.
	run func(ctx context.Context, e *hostileEnv) int64
}

func BenchmarkHostile(b *testing.B) {
	attacks := []hostileAttack{
		{name: "declared-length-hold", run: attackDeclaredLength},
		{name: "idle-connections", run: attackIdleConns},
		{name: "trickled-bodies", run: attackTrickle},
		{name: "huge-api-body", run: attackHugeAPIBody},
		{name: "costly-queries", setup: fillInspector, run: attackCostlyQueries},
		{name: "validation-bomb", run: attackValidationBomb},
		{name: "subscription-flood", run: attackSubscriptionFlood},
		{name: "websocket-protocol-abuse", run: attackWSProtocol},
		{name: "anonymous-flood", run: attackAnonymousFlood},
		{name: "random-bodies-to-inspectors", setup: moreInspectors, run: attackRandomBodies},
	}
	for _, a := range attacks {
		b.Run(a.name, func(b *testing.B) {
			r := harness.Start(b, "", "--log-level", "error")
			e := &hostileEnv{r: r}
			e.inspector = hostileGraphQL(b, r, attackerIP, "", `mutation{ createInspector{ id } }`, "createInspector", "id")
			e.token = hostileGraphQL(b, r, attackerIP, "", `mutation{ signUp(name: "mallory"){ token } }`, "signUp", "token")
			e.endpoint = hostileGraphQL(b, r, attackerIP, e.token,
				`mutation{ createEndpoint(input:{name:"p", mode: PROXY, target:"127.0.0.1:9"}){ id } }`, "createEndpoint", "id")
			if a.setup != nil {
				a.setup(b, e)
			}
			legit := hostileGraphQL(b, r, "127.0.0.1", "", `mutation{ createInspector{ id } }`, "createInspector", "id")

			ctx, cancel := context.WithTimeout(context.Background(), hostileFor)
			defer cancel()
			var attackOps atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); attackOps.Store(a.run(ctx, e)) }()
			got := legitimateClient(ctx, r, legit)
			wg.Wait()

			peak, err := harness.ProcPeakRSSKiB(r.PID())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(100*got.okRatio(), "legit-ok-%")
			b.ReportMetric(float64(got.p99())/float64(time.Millisecond), "legit-p99-ms")
			b.ReportMetric(float64(got.total()), "legit-requests")
			b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
			b.ReportMetric(float64(attackOps.Load()), "attack-ops")
			b.ReportMetric(0, "ns/op")
			if r.Exited() {
				b.Errorf("the relay died under %s:\n%s", a.name, r.Output())
			}
			if got.failed > 0 {
				b.Logf("%s: %d of %d legitimate requests failed; first: %s", a.name, got.failed, got.total(), got.first)
			}
		})
	}
}

// legitResult is what the legitimate client saw.
type legitResult struct {
	mu     sync.Mutex
	ok     int
	failed int
	first  string
	lat    []time.Duration
}

func (l *legitResult) add(d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lat = append(l.lat, d)
	if err == nil {
		l.ok++
		return
	}
	l.failed++
	if l.first == "" {
		l.first = err.Error()
	}
}

func (l *legitResult) total() int { return l.ok + l.failed }

func (l *legitResult) okRatio() float64 {
	if l.total() == 0 {
		return 0
	}
	return float64(l.ok) / float64(l.total())
}

func (l *legitResult) p99() time.Duration {
	if len(l.lat) == 0 {
		return 0
	}
	s := slices.Clone(l.lat)
	slices.Sort(s)
	return s[len(s)*99/100]
}

// legitDeadline is how long a legitimate request may take before it counts
// as failed: a sender's webhook timeout is usually a few seconds.
const legitDeadline = 2 * time.Second

// legitimateClient sends, from 127.0.0.1, a delivery to its own inspector
// and a query of its history ten times a second per worker, on schedule
// whether earlier ones have been answered or not (an attack that stalls the
// relay shows as failures, not as fewer requests), until ctx ends.
func legitimateClient(ctx context.Context, r *harness.Relay, inspector string) *legitResult {
	return steadyTenant(ctx, r, "inspector", inspector, "", jsonBody)
}

// steadyTenant is a tenant's ordinary traffic: four workers each send a
// delivery to the address (an "inspector" or an "endpoint" of that id,
// answered 204) and read its history page through the API (with token,
// when not empty) ten times a second, on schedule, until ctx ends.
func steadyTenant(ctx context.Context, r *harness.Relay, kind, address, token string, body []byte) *legitResult {
	const workers = 4
	res := &legitResult{}
	client := clientFrom("127.0.0.1", workers)
	client.Timeout = legitDeadline
	defer client.CloseIdleConnections()
	query, _ := json.Marshal(map[string]any{
		"query":     `query($id: ID!){ ` + kind + `(id: $id){ deliveries(first: 5){ nodes{ id method path } } } }`,
		"variables": map[string]any{"id": address},
	})
	base := "http://127.0.0.1:" + strconv.Itoa(r.Port)
	send := func(req *http.Request, want int) {
		t0 := time.Now()
		err := expectStatus(client.Do(req))(want)
		res.add(time.Since(t0), err)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				wg.Add(2)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPost, base+"/hook?w="+strconv.Itoa(w), bytes.NewReader(body))
					req.Host = r.AddressHost(address)
					req.Header.Set("Content-Type", "application/json")
					send(req, http.StatusNoContent)
				}()
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(query))
					req.Host = "localhost:" + strconv.Itoa(r.Port)
					req.Header.Set("Content-Type", "application/json")
					if token != "" {
						req.Header.Set("Authorization", "Bearer "+token)
					}
					send(req, http.StatusOK)
				}()
			}
		}()
	}
	wg.Wait()
	return res
}

// expectStatus reads an answer to its end and checks its status; GraphQL
// answers must also carry no errors.
func expectStatus(resp *http.Response, err error) func(want int) error {
	return func(want int) error {
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if rerr != nil {
			return rerr
		}
		if resp.StatusCode != want {
			return fmt.Errorf("status %d, want %d: %.200s", resp.StatusCode, want, body)
		}
		if want == http.StatusOK && bytes.Contains(body, []byte(`"errors"`)) {
			return fmt.Errorf("graphql errors: %.200s", body)
		}
		return nil
	}
}

// clientFrom is a keep-alive client whose connections start at ip.
func clientFrom(ip string, conns int) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: d.DialContext, MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2,
			DisableCompression: true,
		},
	}
}

// dialAs opens a raw TCP connection from ip to the relay, until ctx ends.
func dialAs(ctx context.Context, r *harness.Relay, ip string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(r.Port))
}

// hostileGraphQL runs one GraphQL operation from ip and returns
// data.<field>.<key>.
func hostileGraphQL(b *testing.B, r *harness.Relay, ip, token, query, field, key string) string {
	b.Helper()
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/graphql", bytes.NewReader(body))
	req.Host = "localhost:" + strconv.Itoa(r.Port)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := clientFrom(ip, 1)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   map[string]map[string]any
		Errors []any
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		b.Fatal(err)
	}
	v, _ := out.Data[field][key].(string)
	if v == "" {
		b.Fatalf("%s: no %s in %+v", query, key, out)
	}
	return v
}

// holdConns keeps up to n connections from the attacker open until ctx
// ends; open writes what each sends first. A connection the relay closes is
// replaced. It returns how many connections were opened.
func holdConns(ctx context.Context, e *hostileEnv, n int, open func(c net.Conn) error) int64 {
	var opened atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := dialAs(ctx, e.r, attackerIP)
				if err != nil {
					pause(ctx, 50*time.Millisecond)
					continue
				}
				opened.Add(1)
				if open(c) == nil {
					// Wait until the relay closes it or the attack ends.
					go func() { <-ctx.Done(); c.Close() }()
					_, _ = io.Copy(io.Discard, c)
				}
				c.Close()
				pause(ctx, 10*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	return opened.Load()
}

// pause waits d or until ctx ends; attack loops use it between tries.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// attackDeclaredLength declares a 10 MiB body to a PROXY Endpoint, sends
// one byte and goes silent, on many connections.
func attackDeclaredLength(ctx context.Context, e *hostileEnv) int64 {
	return holdConns(ctx, e, 400, func(c net.Conn) error {
		_, err := fmt.Fprintf(c, "POST /hook HTTP/1.1\r\nHost: %s\r\nContent-Length: 10485760\r\n\r\nx", e.r.AddressHost(e.endpoint))
		return err
	})
}

// attackIdleConns sends one request per connection and keeps thousands of
// them open.
func attackIdleConns(ctx context.Context, e *hostileEnv) int64 {
	return holdConns(ctx, e, 3000, func(c net.Conn) error {
		_, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: localhost:%d\r\n\r\n", e.r.Port)
		return err
	})
}

// attackTrickle sends request bodies one byte a second.
func attackTrickle(ctx context.Context, e *hostileEnv) int64 {
	return holdConns(ctx, e, 200, func(c net.Conn) error {
		if _, err := fmt.Fprintf(c, "POST /hook HTTP/1.1\r\nHost: %s\r\nContent-Length: 1048576\r\n\r\n", e.r.AddressHost(e.inspector)); err != nil {
			return err
		}
		for ctx.Err() == nil {
			if _, err := c.Write([]byte("x")); err != nil {
				return err
			}
			pause(ctx, time.Second)
		}
		return nil
	})
}

// attackHugeAPIBody streams 300 MB GraphQL requests.
func attackHugeAPIBody(ctx context.Context, e *hostileEnv) int64 {
	return repeat(ctx, 4, func(client *http.Client) {
		body := io.MultiReader(strings.NewReader(`{"query":"{ __typename }","x":"`), io.LimitReader(zeros{}, 300<<20), strings.NewReader(`"}`))
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/graphql", body)
		req.Host = "localhost:" + strconv.Itoa(e.r.Port)
		req.Header.Set("Content-Type", "application/json")
		drainResp(client.Do(req))
	})
}

// zeros is an endless reader of 'a's.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// fillInspector stores 100 deliveries of 256 KiB in the attacker's
// inspector, so queries of its bodies are as costly as they can be.
func fillInspector(b *testing.B, e *hostileEnv) {
	b.Helper()
	client := clientFrom(attackerIP, 4)
	defer client.CloseIdleConnections()
	body := bytes.Repeat([]byte("b"), 256<<10)
	for i := range 100 {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/fill?i="+strconv.Itoa(i), bytes.NewReader(body))
		req.Host = e.r.AddressHost(e.inspector)
		if err := expectStatus(client.Do(req))(http.StatusNoContent); err != nil {
			b.Fatalf("fill inspector: %v", err)
		}
	}
}

// attackCostlyQueries asks for every body of a full inspector under many
// aliases, and for the log many times over.
func attackCostlyQueries(ctx context.Context, e *hostileEnv) int64 {
	var q strings.Builder
	q.WriteString("{")
	for i := range 6 {
		fmt.Fprintf(&q, ` a%d: inspector(id: %q){ deliveries(first: 1000){ nodes{ body bodyBase64 headers{ name value } } } }`, i, e.inspector)
	}
	q.WriteString("}")
	var ev strings.Builder
	ev.WriteString("{")
	for i := range 60 {
		fmt.Fprintf(&ev, ` e%d: events(first: 1000){ edges{ node{ id type data } } }`, i)
	}
	ev.WriteString("}")
	return repeat(ctx, 4, func(client *http.Client) {
		postGraphQL(ctx, client, e, "", q.String())
		postGraphQL(ctx, client, e, e.token, ev.String())
	})
}

// attackValidationBomb sends documents of 20 000 fields.
func attackValidationBomb(ctx context.Context, e *hostileEnv) int64 {
	doc := "{" + strings.Repeat(" __typename", 20000) + " }"
	return repeat(ctx, 2, func(client *http.Client) { postGraphQL(ctx, client, e, "", doc) })
}

// attackSubscriptionFlood opens sockets that start thousands of
// subscriptions and never read, while deliveries flow to what they watch.
func attackSubscriptionFlood(ctx context.Context, e *hostileEnv) int64 {
	var ops atomic.Int64
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := attackerWS(ctx, e)
				if err != nil {
					pause(ctx, 100*time.Millisecond)
					continue
				}
				_ = c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{}})
				closed := false
				for i := 0; i < 20000 && ctx.Err() == nil; i++ {
					err := c.WriteJSON(map[string]any{"id": fmt.Sprintf("%d-%d", s, i), "type": "subscribe", "payload": map[string]any{
						"query": `subscription($a: ID!){ deliveries(address: $a, since: ""){ id body bodyBase64 } }`, "variables": map[string]any{"a": e.inspector},
					}})
					if err != nil {
						closed = true // the relay closed it: open another
						break
					}
					ops.Add(1)
				}
				if !closed {
					<-ctx.Done()
				}
				c.Close()
			}
		}()
	}
	body := bytes.Repeat([]byte("s"), 64<<10)
	ops.Add(repeat(ctx, 2, func(client *http.Client) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/flood", bytes.NewReader(body))
		req.Host = e.r.AddressHost(e.inspector)
		drainResp(client.Do(req))
	}))
	wg.Wait()
	return ops.Load()
}

// attackWSProtocol opens sockets that break the protocol: a string
// connection_init payload left hanging, and 200 MiB frames.
func attackWSProtocol(ctx context.Context, e *hostileEnv) int64 {
	var ops atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := attackerWS(ctx, e)
				if err != nil {
					pause(ctx, 50*time.Millisecond)
					continue
				}
				ops.Add(1)
				_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"connection_init","payload":"x"}`))
				// Abandoned without a close: the relay must not keep it.
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		big := bytes.Repeat([]byte("a"), 200<<20)
		for ctx.Err() == nil {
			c, err := attackerWS(ctx, e)
			if err != nil {
				pause(ctx, 50*time.Millisecond)
				continue
			}
			ops.Add(1)
			_ = c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{}})
			_ = c.WriteMessage(websocket.TextMessage, big)
			c.Close()
		}
	}()
	wg.Wait()
	return ops.Load()
}

// attackerWS opens a graphql-transport-ws socket from the attacker's address.
func attackerWS(ctx context.Context, e *hostileEnv) (*websocket.Conn, error) {
	nd := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(attackerIP)}, Timeout: 5 * time.Second}
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second, NetDialContext: nd.DialContext}
	h := http.Header{"Host": {"localhost:" + strconv.Itoa(e.r.Port)}}
	c, _, err := d.DialContext(ctx, "ws://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/graphql", h)
	return c, err
}

// attackAnonymousFlood creates inspectors as fast as it can and fills its
// own with full-size deliveries.
func attackAnonymousFlood(ctx context.Context, e *hostileEnv) int64 {
	body := bytes.Repeat([]byte("f"), 256<<10)
	return repeat(ctx, 8, func(client *http.Client) {
		postGraphQL(ctx, client, e, "", `mutation{ createInspector{ id } }`)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/flood", bytes.NewReader(body))
		req.Host = e.r.AddressHost(e.inspector)
		for i := range 40 {
			req.Header.Add("X-Pad-"+strconv.Itoa(i), strings.Repeat("h", 1000))
		}
		drainResp(client.Do(req))
	})
}

// moreInspectors gives the attacker six more inspectors, what its
// address's anonymous burst leaves it after the set-up's sign-up.
func moreInspectors(b *testing.B, e *hostileEnv) {
	e.inspectors = []string{e.inspector}
	for range 6 {
		e.inspectors = append(e.inspectors, hostileGraphQL(b, e.r, attackerIP, "", `mutation{ createInspector{ id } }`, "createInspector", "id"))
	}
}

// attackRandomBodies sends, on as many connections as one address may
// open, bodies of 256 KiB (the capture cap) that do not compress to the
// attacker's seven inspectors in turn: every one is kept whole in the log, so
// each waits for the log's writer holding its body and its event.
func attackRandomBodies(ctx context.Context, e *hostileEnv) int64 {
	body := make([]byte, 256<<10)
	_, _ = rand.Read(body)
	var next atomic.Int64
	return repeat(ctx, 256, func(client *http.Client) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/flood", bytes.NewReader(body))
		req.Host = e.r.AddressHost(e.inspectors[int(next.Add(1))%len(e.inspectors)])
		drainResp(client.Do(req))
	})
}

// repeat runs op on workers goroutines from the attacker's address until
// ctx ends and counts the calls.
func repeat(ctx context.Context, workers int, op func(*http.Client)) int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	client := clientFrom(attackerIP, workers)
	defer client.CloseIdleConnections()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				op(client)
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load()
}

func postGraphQL(ctx context.Context, client *http.Client, e *hostileEnv, token, query string) {
	body, _ := json.Marshal(map[string]any{"query": query})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(e.r.Port)+"/graphql", bytes.NewReader(body))
	req.Host = "localhost:" + strconv.Itoa(e.r.Port)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	drainResp(client.Do(req))
}

func drainResp(resp *http.Response, err error) {
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
