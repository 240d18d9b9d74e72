package ingress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/record"
)

// routeMap is an AddressResolver over a map, standing in for the
// projection that resolves addresses in the service.
type routeMap struct {
	mu     sync.Mutex
	routes map[string]Route
}

func (m *routeMap) Resolve(_ context.Context, id string) (Route, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.routes[id]
	if !ok {
		return Route{}, fmt.Errorf("resolve %s: %w", id, domain.ErrNotFound)
	}
	return r, nil
}

func (m *routeMap) set(r Route) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes[r.ID] = r
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// httpForwarder takes a forward to a real local HTTP server, as an agent
// would: target from its own configuration plus the recorded path.
type httpForwarder struct {
	mu      sync.Mutex
	target  string // 127.0.0.1:port of the local process
	cmds    []domain.ForwardCommand
	noAgent bool  // answer as the tunnel does when no agent is connected
	err     error // fail as the bus does when no outcome arrives
}

func (f *httpForwarder) Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error) {
	f.mu.Lock()
	f.cmds = append(f.cmds, cmd)
	target, noAgent, ferr := f.target, f.noAgent, f.err
	f.mu.Unlock()
	if ferr != nil {
		return domain.ForwardOutcome{}, ferr
	}
	if noAgent {
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: http.StatusServiceUnavailable, Error: "no agent connected"}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cmd.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, cmd.Method, "http://"+target+cmd.Target, bytes.NewReader(cmd.Body))
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	for _, h := range cmd.Headers {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: http.StatusGatewayTimeout,
			Error:   fmt.Sprintf("%s did not answer within %s", target, cmd.Timeout),
			Failure: fmt.Sprintf("%s did not answer within %s", target, cmd.Timeout)}, nil
	case err != nil:
		return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: http.StatusBadGateway,
			Error:   fmt.Sprintf("nothing answered at %s (%v)", target, err),
			Failure: "nothing answered at " + target}, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return domain.ForwardOutcome{}, err
	}
	return domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: resp.StatusCode, Headers: headerList(resp.Header), Body: body}, nil
}

func (f *httpForwarder) set(change func(f *httpForwarder)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *httpForwarder) commands() []domain.ForwardCommand {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]domain.ForwardCommand(nil), f.cmds...)
}

func headerList(h http.Header) []domain.Header {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []domain.Header
	for _, name := range names {
		for _, v := range h[name] {
			out = append(out, domain.Header{Name: name, Value: v})
		}
	}
	return out
}

// env is a running ingress server on 127.0.0.1 over a real SQLite store.
type env struct {
	t      *testing.T
	store  *sqlite.Store
	codec  *domain.Codec
	routes *routeMap
	clock  *clock
	fwd    *httpForwarder
	addr   string // 127.0.0.1:port of the ingress server
	srv    *Server
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, nil)
}

// newEnvWith is newEnv with a chance to change the server's dependencies.
func newEnvWith(t *testing.T, cfg Config, change func(*Deps)) *env {
	t.Helper()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e := &env{
		t: t, store: store, codec: domain.NewCodec(),
		routes: &routeMap{routes: map[string]Route{}},
		clock:  &clock{now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)},
		fwd:    &httpForwarder{target: "127.0.0.1:1"},
	}
	cfg.Domain = "localhost"
	deps := Deps{
		Recorder: record.New(record.Config{Store: store, Codec: e.codec, Now: e.clock.Now}),
		Resolver: e.routes, Forwarder: e.fwd,
		Bare: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "bare "+r.URL.Path)
		}),
	}
	if change != nil {
		change(&deps)
	}
	srv := New(cfg, deps)
	e.srv = srv
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Config.DisableGeneralOptionsHandler = true // let "OPTIONS *" reach the handler
	ts.Start()
	t.Cleanup(ts.Close)
	e.addr = ts.Listener.Addr().String()
	return e
}

// addInspector creates an inspector in the store and makes it resolvable.
func (e *env) addInspector(id string, ttl time.Duration) {
	e.t.Helper()
	insp, err := domain.NewInspector(id, ttl)
	if err != nil {
		e.t.Fatal(err)
	}
	e.appendEvents(domain.InspectorStream(id), insp.Changes()...)
	e.routes.set(Route{ID: id, Kind: domain.AddressInspector, LastActivityAt: e.clock.Now()})
}

func (e *env) appendEvents(stream string, events ...domain.Event) {
	e.t.Helper()
	data := make([]domain.EventData, 0, len(events))
	for i, ev := range events {
		d, err := e.codec.Encode(fmt.Sprintf("00000000-0000-4000-8000-%012d", len(stream)*100+i), ev, e.clock.Now(), domain.Trace{})
		if err != nil {
			e.t.Fatal(err)
		}
		data = append(data, d)
	}
	if _, err := e.store.Append(e.t.Context(), stream, domain.NoStream(), data...); err != nil {
		e.t.Fatalf("append %s: %v", stream, err)
	}
}

// raw sends bytes as they are on one connection and reads the answer.
func (e *env) raw(request string) (*http.Response, []byte) {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		e.t.Fatal(err)
	}
	method, _, _ := strings.Cut(request, " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		e.t.Fatalf("read answer to %q: %v", firstLine(request), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, body
}

// do sends a request with net/http's client to host.
func (e *env) do(method, host, target string, header http.Header, body []byte) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, "http://"+e.addr+target, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, b
}

// lastDelivery returns the newest delivery in the log and every event of
// its stream. It reads right after the answer arrived, without waiting:
// the delivery must already be durable when the sender is answered.
func (e *env) lastDelivery() (domain.DeliveryReceived, []domain.Event) {
	e.t.Helper()
	recs, err := e.store.ReadAll(e.t.Context(), 0, 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Type == domain.TypeDeliveryReceived {
			return e.decode(recs[i]).(domain.DeliveryReceived), e.stream(recs[i].Stream)
		}
	}
	e.t.Fatal("no delivery in the log")
	return domain.DeliveryReceived{}, nil
}

func (e *env) stream(name string) []domain.Event {
	e.t.Helper()
	recs, err := e.store.ReadStream(e.t.Context(), name, 0, 1000)
	if err != nil {
		e.t.Fatalf("read %s: %v", name, err)
	}
	out := make([]domain.Event, 0, len(recs))
	for _, r := range recs {
		out = append(out, e.decode(r))
	}
	return out
}

func (e *env) decode(r domain.RecordedEvent) domain.Event {
	e.t.Helper()
	ev, err := e.codec.Decode(r.Type, r.Data)
	if err != nil {
		e.t.Fatal(err)
	}
	return ev
}

func (e *env) lastPosition() uint64 {
	e.t.Helper()
	p, err := e.store.LastPosition(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

func eventTypes(events []domain.Event) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = ev.EventType()
	}
	return out
}

func TestInspectorRecordsTargetByteForByte(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	tests := []struct{ method, target, want string }{
		{"GET", "/", "/"},
		{"GET", "/x", "/x"},
		{"GET", "/x/", "/x/"},
		{"POST", "//a//b", "//a//b"},
		{"POST", "/a%2Fb?x=1&x=2", "/a%2Fb?x=1&x=2"},
		{"GET", "/%7Euser?q=a+b", "/%7Euser?q=a+b"},
		{"GET", "/a/../b/./c?", "/a/../b/./c?"},
		{"GET", "/x?%zz=%&=", "/x?%zz=%&="},
		{"OPTIONS", "*", "*"},
		{"GET", "http://insp1.localhost/p//q/?z=%41", "/p//q/?z=%41"},
		{"GET", "http://insp1.localhost", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.target, func(t *testing.T) {
			resp, body := e.raw(tt.method + " " + tt.target + " HTTP/1.1\r\nHost: insp1.localhost:8080\r\nConnection: close\r\n\r\n")
			if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
				t.Fatalf("answer %d %q, want 204 with no body", resp.StatusCode, body)
			}
			got, events := e.lastDelivery()
			if got.Target != tt.want || got.Method != tt.method || got.Address != "insp1" || got.AddressKind != domain.AddressInspector {
				t.Errorf("recorded %s %q at %s (%s), want %s %q at insp1", got.Method, got.Target, got.Address, got.AddressKind, tt.method, tt.want)
			}
			if !reflect.DeepEqual(got.Answer, &domain.ReceiptAnswer{Status: http.StatusNoContent}) || len(events) != 1 {
				t.Errorf("stream = %+v, want one DeliveryReceived answered 204", events)
			}
		})
	}
}

func TestEveryMethodAnswered204(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT", "PROPFIND", "REPORT", "PURGE", "MKCOL", "X-CUSTOM"}
	for _, method := range methods {
		t.Run(method, func(t *testing.T) {
			resp, body := e.raw(method + " /m/" + method + " HTTP/1.1\r\nHost: insp1.localhost\r\nContent-Length: 3\r\n\r\nabc")
			if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
				t.Fatalf("%s answered %d %q, want 204 with no body", method, resp.StatusCode, body)
			}
			if ct := resp.Header.Values("Content-Type"); len(ct) != 0 {
				t.Errorf("204 has Content-Type %q", ct)
			}
			got, _ := e.lastDelivery()
			if got.Method != method || got.Target != "/m/"+method || string(got.Body) != "abc" || !got.Complete {
				t.Errorf("recorded %s %q body %q complete %v", got.Method, got.Target, got.Body, got.Complete)
			}
		})
	}
}

func TestRecordedRequestDetails(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	resp, _ := e.raw("POST /hook?a=1 HTTP/1.1\r\n" +
		"Host: INSP1.localhost:8080\r\n" +
		"X-Sig: v1=first\r\n" +
		"Content-Type: application/json\r\n" +
		"x-sig: v1=second\r\n" +
		"Content-Length: 11\r\n" +
		"\r\n" + `{"ok":true}`)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got, _ := e.lastDelivery()
	wantHeaders := []domain.Header{
		{Name: "Content-Length", Value: "11"},
		{Name: "Content-Type", Value: "application/json"},
		{Name: "X-Sig", Value: "v1=first"},
		{Name: "X-Sig", Value: "v1=second"},
	}
	if !reflect.DeepEqual(got.Headers, wantHeaders) {
		t.Errorf("headers = %+v, want %+v", got.Headers, wantHeaders)
	}
	if got.Host != "INSP1.localhost:8080" || got.Proto != "HTTP/1.1" || !strings.HasPrefix(got.RemoteAddr, "127.0.0.1:") {
		t.Errorf("host %q proto %q remote %q", got.Host, got.Proto, got.RemoteAddr)
	}
	if string(got.Body) != `{"ok":true}` || got.BodySize != 11 || !got.Complete {
		t.Errorf("body %q size %d complete %v", got.Body, got.BodySize, got.Complete)
	}
}

func TestInspectorBodies(t *testing.T) {
	const maxBody = 1 << 20
	e := newEnv(t, Config{MaxBody: maxBody})
	e.addInspector("insp1", time.Hour)
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16) // 300 KiB
	huge := bytes.Repeat([]byte{0xfe}, 2*maxBody)
	tests := []struct {
		name         string
		body         []byte
		chunked      bool
		wantStored   int
		wantSize     int64
		wantComplete bool
	}{
		{name: "empty", body: nil, wantStored: 0, wantSize: 0, wantComplete: true},
		{name: "binary", body: []byte{0, 1, 2, 0xff, '\r', '\n'}, wantStored: 6, wantSize: 6, wantComplete: true},
		{name: "300 KiB", body: big, wantStored: 256 << 10, wantSize: 307200},
		{name: "300 KiB chunked", body: big, chunked: true, wantStored: 256 << 10, wantSize: 307200},
		// max-body bounds forwarding only: an inspector counts every byte.
		{name: "over max body", body: huge, wantStored: 256 << 10, wantSize: 2 * maxBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req bytes.Buffer
			req.WriteString("POST /big HTTP/1.1\r\nHost: insp1.localhost\r\nConnection: close\r\n")
			if tt.chunked {
				req.WriteString("Transfer-Encoding: chunked\r\n\r\n")
				for rest := tt.body; len(rest) > 0; {
					n := min(len(rest), 10000)
					fmt.Fprintf(&req, "%x\r\n%s\r\n", n, rest[:n])
					rest = rest[n:]
				}
				req.WriteString("0\r\n\r\n")
			} else {
				fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n%s", len(tt.body), tt.body)
			}
			resp, body := e.raw(req.String())
			if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
				t.Fatalf("answer %d %q, want 204", resp.StatusCode, body)
			}
			got, _ := e.lastDelivery()
			if len(got.Body) != tt.wantStored || got.BodySize != tt.wantSize || got.Complete != tt.wantComplete {
				t.Errorf("stored %d bytes, size %d, complete %v; want %d, %d, %v",
					len(got.Body), got.BodySize, got.Complete, tt.wantStored, tt.wantSize, tt.wantComplete)
			}
			if !bytes.HasPrefix(tt.body, got.Body) {
				t.Error("stored body is not the start of the sent body")
			}
		})
	}
}

func TestConcurrentDeliveriesAllRecorded(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	const n = 20
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(t.Context(), "POST", fmt.Sprintf("http://%s/c/%d", e.addr, i), strings.NewReader("x"))
			if err != nil {
				return
			}
			req.Host = "insp1.localhost"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	recs, err := e.store.ReadAll(t.Context(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, r := range recs {
		if r.Type == domain.TypeDeliveryReceived {
			targets[e.decode(r).(domain.DeliveryReceived).Target] = true
		}
	}
	for i := range n {
		if statuses[i] != http.StatusNoContent || !targets[fmt.Sprintf("/c/%d", i)] {
			t.Errorf("request %d: status %d, recorded %v", i, statuses[i], targets[fmt.Sprintf("/c/%d", i)])
		}
	}
}

func TestUnknownAddressesAnswer503(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	e.routes.set(Route{ID: "gone", Kind: domain.AddressEndpoint, AccountID: "acc", Mode: domain.ModeLog, Deleted: true})
	hosts := []string{"nope.localhost", "nope.localhost:8080", "a.insp1.localhost", "insp1.example.com", "gone.localhost", "-x.localhost"}
	before := e.lastPosition()
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			for _, target := range []string{"/", "/x", "//a"} {
				resp, body := e.do("POST", host, target, nil, []byte("x"))
				if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "No agent for client\nunknown address\n" {
					t.Errorf("%s%s answered %d %q", host, target, resp.StatusCode, body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type %q", ct)
				}
			}
		})
	}
	if after := e.lastPosition(); after != before {
		t.Errorf("unknown addresses were recorded: log moved from %d to %d", before, after)
	}
}

func TestBareDomainGoesToBareHandler(t *testing.T) {
	e := newEnv(t, Config{})
	resp, body := e.do("GET", "localhost:8080", "/graphql", nil, nil)
	if resp.StatusCode != http.StatusOK || string(body) != "bare /graphql" {
		t.Errorf("bare domain answered %d %q", resp.StatusCode, body)
	}
}

func TestExpiredInspector(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	e.clock.advance(time.Hour)

	// An expired inspector records nothing: its deliveries are on their
	// way out of the log.
	for i := range 2 {
		resp, body := e.do("POST", "insp1.localhost", "/late", nil, []byte("x"))
		if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "No agent for client\naddress expired\n" {
			t.Fatalf("request %d answered %d %q", i, resp.StatusCode, body)
		}
	}
	recs, err := e.store.ReadAll(e.t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Type == domain.TypeDeliveryReceived {
			t.Errorf("expired inspector recorded a delivery: %s", r.Data)
		}
	}
	// The first late request recorded the expiry, the second found it.
	want := []string{domain.TypeInspectorCreated, domain.TypeInspectorExpired}
	if got := eventTypes(e.stream(domain.InspectorStream("insp1"))); !reflect.DeepEqual(got, want) {
		t.Errorf("inspector stream = %v, want %v", got, want)
	}
}

func TestInspectorExpiry(t *testing.T) {
	tests := []struct {
		name       string
		idle       time.Duration
		expiredFlg bool
		wantStatus int
	}{
		{name: "just before TTL", idle: time.Hour - time.Nanosecond, wantStatus: http.StatusNoContent},
		{name: "at TTL", idle: time.Hour, wantStatus: http.StatusServiceUnavailable},
		{name: "expiry recorded", idle: 0, expiredFlg: true, wantStatus: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.addInspector("insp1", time.Hour)
			e.routes.set(Route{ID: "insp1", Kind: domain.AddressInspector, LastActivityAt: e.clock.Now(), Expired: tt.expiredFlg})
			e.clock.advance(tt.idle)
			resp, _ := e.do("GET", "insp1.localhost", "/", nil, nil)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
		})
	}
}

func TestLogEndpointRecordsAndAnswers204(t *testing.T) {
	e := newEnv(t, Config{})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeLog})
	resp, body := e.do("PUT", "ep1.localhost", "/orders/7?x=1", http.Header{"X-A": {"1", "2"}}, []byte("payload"))
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("answered %d %q", resp.StatusCode, body)
	}
	got, events := e.lastDelivery()
	if got.AddressKind != domain.AddressEndpoint || got.AccountID != "acc1" || got.Target != "/orders/7?x=1" || string(got.Body) != "payload" {
		t.Errorf("recorded %+v", got)
	}
	if len(events) != 1 || !reflect.DeepEqual(got.Answer, &domain.ReceiptAnswer{Status: http.StatusNoContent}) {
		t.Errorf("stream = %+v", events)
	}
	if n := len(e.fwd.commands()); n != 0 {
		t.Errorf("LOG mode forwarded %d times", n)
	}
}

// localServer runs the developer's local process for PROXY tests.
func localServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.Listener.Addr().String()
}

func TestProxyPassesLocalAnswerUnchanged(t *testing.T) {
	e := newEnv(t, Config{ForwardTimeout: 5 * time.Second})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy, ResponseCapture: true})
	binary := []byte{0, 1, 2, 0xff, 'o', 'k', '\n'}
	tests := []struct {
		status      int
		contentType []string
		body        []byte
	}{
		{status: 201, contentType: []string{"application/json"}, body: []byte(`{"id":1}`)},
		{status: 404, body: binary}, // no Content-Type: none may be added
		{status: 500, contentType: []string{"text/plain"}, body: []byte("boom")},
		{status: 400, contentType: []string{"text/html"}, body: nil},
		{status: 299, body: []byte("odd status")},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			type request struct {
				uri    string
				header http.Header
				body   []byte
			}
			seenc := make(chan request, 1)
			local := localServer(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				seenc <- request{uri: r.RequestURI, header: r.Header.Clone(), body: body}
				h := w.Header()
				h["Content-Type"] = tt.contentType
				h.Add("X-Multi", "a")
				h.Add("X-Multi", "b")
				h.Add("X-Multi", "c")
				h.Set("Connection", "close") // hop-by-hop: must not pass
				w.WriteHeader(tt.status)
				_, _ = w.Write(tt.body)
			})
			e.fwd.set(func(f *httpForwarder) { f.target = local })
			resp, body := e.raw("POST /a%2Fb//c/?x=1&x=2 HTTP/1.1\r\n" +
				"Host: ep1.localhost\r\n" +
				"X-Sig: one\r\nX-Sig: two\r\n" +
				"Connection: close, X-Hop\r\nX-Hop: dropped\r\nKeep-Alive: 5\r\n" +
				"Content-Length: 5\r\n\r\nhello")
			if resp.StatusCode != tt.status || !bytes.Equal(body, tt.body) {
				t.Errorf("sender got %d %q, local sent %d %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if got := resp.Header.Values("X-Multi"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
				t.Errorf("X-Multi = %q", got)
			}
			if got := resp.Header.Values("Content-Type"); !reflect.DeepEqual(got, tt.contentType) && (len(got) != 0 || len(tt.contentType) != 0) {
				t.Errorf("Content-Type = %q, local sent %q", got, tt.contentType)
			}
			if resp.ContentLength != int64(len(tt.body)) {
				t.Errorf("Content-Length %d, body %d bytes", resp.ContentLength, len(tt.body))
			}

			// The local process saw the request as the sender sent it.
			seen := <-seenc
			if seen.uri != "/a%2Fb//c/?x=1&x=2" || string(seen.body) != "hello" {
				t.Errorf("local saw %q %q", seen.uri, seen.body)
			}
			if got := seen.header.Values("X-Sig"); !reflect.DeepEqual(got, []string{"one", "two"}) {
				t.Errorf("local X-Sig = %q", got)
			}
			for _, hop := range []string{"X-Hop", "Keep-Alive"} {
				if v := seen.header.Values(hop); len(v) != 0 {
					t.Errorf("hop-by-hop %s reached the local process: %q", hop, v)
				}
			}

			got, events := e.lastDelivery()
			cmds := e.fwd.commands()
			cmd := cmds[len(cmds)-1]
			// One event: the receipt carries its first attempt's request.
			if len(events) != 1 || got.Forward == nil || *got.Forward != (domain.ReceiptForward{AttemptID: cmd.AttemptID, EndpointID: "ep1"}) {
				t.Errorf("stream = %+v, want the receipt requesting attempt %s", events, cmd.AttemptID)
			}
			if cmd.DeliveryID != got.DeliveryID || cmd.CorrelationID != got.DeliveryID || cmd.EndpointID != "ep1" ||
				cmd.AccountID != "acc1" || !cmd.CaptureResponse || cmd.Timeout != 5*time.Second || cmd.Target != "/a%2Fb//c/?x=1&x=2" {
				t.Errorf("forward command = %+v", cmd)
			}
		})
	}
}

func TestProxyHeadKeepsLocalContentLength(t *testing.T) {
	e := newEnv(t, Config{})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy})
	local := localServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1234")
		w.WriteHeader(http.StatusOK)
	})
	e.fwd.set(func(f *httpForwarder) { f.target = local })
	resp, body := e.raw("HEAD /file HTTP/1.1\r\nHost: ep1.localhost\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.ContentLength != 1234 {
		t.Errorf("HEAD answered %d, %d body bytes, Content-Length %d", resp.StatusCode, len(body), resp.ContentLength)
	}
}

func TestProxyBodyTooLarge(t *testing.T) {
	e := newEnv(t, Config{MaxBody: 1024})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy})
	resp, body := e.do("POST", "ep1.localhost", "/big", nil, bytes.Repeat([]byte("a"), 4096))
	if resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != "Request body larger than 1024 bytes\n" {
		t.Errorf("answered %d %q", resp.StatusCode, body)
	}
	got, events := e.lastDelivery()
	if len(got.Body) != 1024 || got.BodySize != 1025 || got.Complete {
		t.Errorf("stored %d bytes, size %d, complete %v", len(got.Body), got.BodySize, got.Complete)
	}
	if len(events) != 1 || got.Answer == nil || got.Answer.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("stream = %+v", events)
	}
	if n := len(e.fwd.commands()); n != 0 {
		t.Errorf("an oversize body was forwarded %d times", n)
	}

	// At the limit the body is forwarded whole.
	local := localServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b))
	})
	e.fwd.set(func(f *httpForwarder) { f.target = local })
	resp, body = e.do("POST", "ep1.localhost", "/max", nil, bytes.Repeat([]byte("a"), 1024))
	if resp.StatusCode != http.StatusOK || string(body) != "1024" {
		t.Errorf("body at the limit: %d %q", resp.StatusCode, body)
	}
}

func TestProxyFailures(t *testing.T) {
	closed := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	slow := func(t *testing.T) string {
		return localServer(t, func(w http.ResponseWriter, r *http.Request) {
			// Reading the body lets net/http notice the caller hanging up.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		})
	}
	tests := []struct {
		name       string
		setup      func(t *testing.T, f *httpForwarder)
		wantStatus int
		wantBody   string // prefix
		wantEvents []string
		wantReason string // of the relay's own answer, when recorded
	}{
		{
			name:       "no agent",
			setup:      func(t *testing.T, f *httpForwarder) { f.noAgent = true },
			wantStatus: http.StatusServiceUnavailable, wantBody: "No agent for client\nno agent connected\n",
			wantEvents: []string{domain.TypeDeliveryReceived},
		},
		{
			name:       "nothing listening",
			setup:      func(t *testing.T, f *httpForwarder) { f.target = closed(t) },
			wantStatus: http.StatusBadGateway, wantBody: "Bad Gateway: nothing answered at 127.0.0.1:",
			wantEvents: []string{domain.TypeDeliveryReceived},
		},
		{
			name:       "local too slow",
			setup:      func(t *testing.T, f *httpForwarder) { f.target = slow(t) },
			wantStatus: http.StatusGatewayTimeout, wantBody: "Gateway Timeout: 127.0.0.1:",
			wantEvents: []string{domain.TypeDeliveryReceived},
		},
		{
			name:       "no outcome from the bus",
			setup:      func(t *testing.T, f *httpForwarder) { f.err = errors.New("request timed out") },
			wantStatus: http.StatusGatewayTimeout, wantBody: "Gateway Timeout: no answer from the local target within 100ms",
			wantEvents: []string{domain.TypeDeliveryReceived, domain.TypeDeliveryAnswered},
			wantReason: "request timed out",
		},
		{
			// The local target answered; the store (here or on the node
			// that ran the attempt) did not take the outcome.
			name: "outcome not recorded",
			setup: func(t *testing.T, f *httpForwarder) {
				f.err = fmt.Errorf("%w: append: JetStream unavailable", domain.ErrOutcomeNotRecorded)
			},
			wantStatus: http.StatusServiceUnavailable, wantBody: "No agent for client\nstore unavailable\n",
			wantEvents: []string{domain.TypeDeliveryReceived, domain.TypeDeliveryAnswered},
			wantReason: "JetStream unavailable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{ForwardTimeout: 100 * time.Millisecond})
			e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy})
			e.fwd.set(func(f *httpForwarder) { tt.setup(t, f) })
			resp, body := e.do("POST", "ep1.localhost", "/hook", nil, []byte("x"))
			if resp.StatusCode != tt.wantStatus || !strings.HasPrefix(string(body), tt.wantBody) {
				t.Errorf("answered %d %q, want %d %q…", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
			}
			_, events := e.lastDelivery()
			if got := eventTypes(events); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("stream = %v, want %v", got, tt.wantEvents)
			}
			if a, ok := events[len(events)-1].(domain.DeliveryAnswered); ok && (a.Status != tt.wantStatus || !strings.Contains(a.Reason, tt.wantReason)) {
				t.Errorf("answer recorded as %+v, want %d …%s…", a, tt.wantStatus, tt.wantReason)
			}
		})
	}
}

func TestStoreUnavailable(t *testing.T) {
	e := newEnv(t, Config{})
	e.addInspector("insp1", time.Hour)
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy})
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"insp1.localhost", "ep1.localhost"} {
		resp, body := e.do("POST", host, "/x", nil, []byte("x"))
		if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "No agent for client\nstore unavailable\n" {
			t.Errorf("%s answered %d %q", host, resp.StatusCode, body)
		}
	}
	if n := len(e.fwd.commands()); n != 0 {
		t.Errorf("an unrecorded delivery was forwarded %d times", n)
	}
}

// TestProxyAnswersOnlyRecordedDeliveries makes the delivery's record fail
// after the forward has started (its stream already exists): the local
// answer must not reach the sender, who is told the relay could not record
// the request.
func TestProxyAnswersOnlyRecordedDeliveries(t *testing.T) {
	e := newEnvWith(t, Config{ForwardTimeout: 5 * time.Second}, func(d *Deps) {
		d.NewDeliveryID = func() string { return "taken" }
	})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy})
	e.appendEvents(domain.DeliveryStream("taken"), domain.DeliveryAnswered{DeliveryID: "taken", Status: 204})
	local := localServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "handled")
	})
	e.fwd.set(func(f *httpForwarder) { f.target = local })
	resp, body := e.do("POST", "ep1.localhost", "/x", nil, []byte("x"))
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "No agent for client\nstore unavailable\n" {
		t.Errorf("unrecorded delivery answered %d %q, want 503 store unavailable", resp.StatusCode, body)
	}
	if got := eventTypes(e.stream(domain.DeliveryStream("taken"))); len(got) != 1 {
		t.Errorf("stream holds %v: the failed record wrote something", got)
	}
}

func TestOneLogLinePerDelivery(t *testing.T) {
	logs := &recordHandler{records: make(chan slog.Record, 10)}
	e := newEnv(t, Config{Logger: slog.New(logs)})
	e.addInspector("insp1", time.Hour)
	// Two deliveries, two lines: no other line comes between them.
	for _, target := range []string{"/one", "/two"} {
		e.do("POST", "insp1.localhost", target, nil, []byte("x"))
		got, _ := e.lastDelivery()
		var rec slog.Record
		select {
		case rec = <-logs.records:
		case <-time.After(10 * time.Second):
			t.Fatalf("no log line for %s", target)
		}
		attrs := map[string]any{}
		rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
		want := map[string]any{"delivery_id": got.DeliveryID, "address": "insp1", "method": "POST", "status": int64(204)}
		if rec.Level != slog.LevelDebug || rec.Message != "delivery" || !reflect.DeepEqual(attrs, want) {
			t.Errorf("log line %s %q %v, want DEBUG \"delivery\" %v", rec.Level, rec.Message, attrs, want)
		}
	}
}

// recordHandler hands every log record to the test.
type recordHandler struct{ records chan slog.Record }

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.records <- r.Clone()
	return nil
}

// TestUnavailableReason: a 503 the relay decided says why on its second
// line, without the node name that is only for the Endpoint's owner.
func TestUnavailableReason(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{"", "no agent connected"},
		{"no agent connected", "no agent connected"},
		{"agent disconnected", "agent disconnected"},
		{"relay shutting down", "relay shutting down"},
		{"relay node lost (relay-2)", "relay node lost"},
	} {
		a := failureAnswer(domain.ForwardOutcome{Status: http.StatusServiceUnavailable, Error: tt.reason})
		if want := "No agent for client\n" + tt.want + "\n"; a.body != want {
			t.Errorf("reason %q: body %q, want %q", tt.reason, a.body, want)
		}
	}
}
