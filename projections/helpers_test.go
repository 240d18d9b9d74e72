package projections

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
	"github.com/relayhq/relay/readmodel"
)

// t0 is the base occurred-at time of test events; nanoseconds prove that
// times survive the round trip exactly.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 89, time.UTC)

// waitTimeout bounds every wait in tests so a bug fails instead of hanging.
const waitTimeout = 20 * time.Second

// writer appends events built by the domain aggregates, like the relay's
// command side does. Its methods return errors so goroutines can use them.
type writer struct {
	store domain.EventStore
	codec *domain.Codec
}

func (w writer) save(ctx context.Context, stream string, expected domain.ExpectedRevision, at time.Time, events ...domain.Event) (uint64, error) {
	data := make([]domain.EventData, len(events))
	for i, ev := range events {
		d, err := w.codec.Encode(uuid.NewString(), ev, at, domain.Trace{CorrelationID: "test"})
		if err != nil {
			return 0, err
		}
		data[i] = d
	}
	res, err := w.store.Append(ctx, stream, expected, data...)
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", stream, err)
	}
	return res.Position, nil
}

func (w writer) load(ctx context.Context, stream string) ([]domain.Event, error) {
	recs, err := w.store.ReadStream(ctx, stream, 0, 10000)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	out := make([]domain.Event, len(recs))
	for i, r := range recs {
		if out[i], err = w.codec.Decode(r.Type, r.Data); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (w writer) newInspector(ctx context.Context, id string, ttl time.Duration, at time.Time) (uint64, error) {
	i, err := domain.NewInspector(id, ttl)
	if err != nil {
		return 0, err
	}
	return w.save(ctx, domain.InspectorStream(id), i.Expected(), at, i.Changes()...)
}

func (w writer) expireInspector(ctx context.Context, id string, lastActivity, at time.Time) (uint64, error) {
	evs, err := w.load(ctx, domain.InspectorStream(id))
	if err != nil {
		return 0, err
	}
	i := domain.LoadInspector(evs)
	if !i.ExpireIfIdle(lastActivity, at) || len(i.Changes()) == 0 {
		return 0, errors.New("inspector did not expire")
	}
	return w.save(ctx, domain.InspectorStream(id), i.Expected(), at, i.Changes()...)
}

// purgeInspector records retention's decision to remove the deliveries
// of inspector id, last active at lastActivity, at now.
func (w writer) purgeInspector(ctx context.Context, id string, lastActivity, now time.Time, deliveries int64) (uint64, error) {
	evs, err := w.load(ctx, domain.InspectorStream(id))
	if err != nil {
		return 0, err
	}
	i := domain.LoadInspector(evs)
	if ok, err := i.PurgeIfRetained(lastActivity, now, time.Hour, deliveries); !ok || err != nil {
		return 0, fmt.Errorf("inspector %s not purged: %v", id, err)
	}
	return w.save(ctx, domain.InspectorStream(id), i.Expected(), now, i.Changes()...)
}

func (w writer) signUp(ctx context.Context, id, name, tokenID, token string, at time.Time) (uint64, error) {
	a, err := domain.SignUp(id, name, tokenID, hashToken(token), domain.AccountFrom{})
	if err != nil {
		return 0, err
	}
	return w.save(ctx, domain.AccountStream(id), a.Expected(), at, a.Changes()...)
}

func (w writer) onAccount(ctx context.Context, id string, at time.Time, cmd func(*domain.Account) error) (uint64, error) {
	evs, err := w.load(ctx, domain.AccountStream(id))
	if err != nil {
		return 0, err
	}
	a := domain.LoadAccount(evs)
	if err := cmd(a); err != nil {
		return 0, err
	}
	if len(a.Changes()) == 0 {
		return 0, errors.New("account command raised no event")
	}
	return w.save(ctx, domain.AccountStream(id), a.Expected(), at, a.Changes()...)
}

func (w writer) newEndpoint(ctx context.Context, id, accountID string, s domain.EndpointSettings, at time.Time) (uint64, error) {
	e, err := domain.NewEndpoint(id, accountID, "", s)
	if err != nil {
		return 0, err
	}
	return w.save(ctx, domain.EndpointStream(id), e.Expected(), at, e.Changes()...)
}

func (w writer) onEndpoint(ctx context.Context, id string, at time.Time, cmd func(*domain.Endpoint) error) (uint64, error) {
	evs, err := w.load(ctx, domain.EndpointStream(id))
	if err != nil {
		return 0, err
	}
	e := domain.LoadEndpoint(evs)
	if err := cmd(e); err != nil {
		return 0, err
	}
	if len(e.Changes()) == 0 {
		return 0, errors.New("endpoint command raised no event")
	}
	return w.save(ctx, domain.EndpointStream(id), e.Expected(), at, e.Changes()...)
}

// agent appends AgentConnected or AgentDisconnected: sessions have no
// aggregate, the tunnel appends them to the Endpoint's agent stream.
func (w writer) agent(ctx context.Context, endpointID string, ev domain.Event, at time.Time) (uint64, error) {
	return w.save(ctx, domain.AgentStream(endpointID), domain.Any(), at, ev)
}

func (w writer) receive(ctx context.Context, id, address string, kind domain.AddressKind, accountID string, req domain.CapturedRequest, at time.Time) (uint64, error) {
	d, err := domain.ReceiveDelivery(id, address, kind, accountID, req)
	if err != nil {
		return 0, err
	}
	return w.save(ctx, domain.DeliveryStream(id), d.Expected(), at, d.Changes()...)
}

// receiveAnswered records a request the relay answered itself at receipt,
// in one event, as ingress does for inspectors and LOG Endpoints.
func (w writer) receiveAnswered(ctx context.Context, id, address string, kind domain.AddressKind, accountID string, req domain.CapturedRequest, status int, at time.Time) (uint64, error) {
	d, err := domain.ReceiveAndAnswer(id, address, kind, accountID, req, status, "answered at receipt")
	if err != nil {
		return 0, err
	}
	return w.save(ctx, domain.DeliveryStream(id), d.Expected(), at, d.Changes()...)
}

func (w writer) onDelivery(ctx context.Context, id string, at time.Time, cmd func(*domain.Delivery) error) (uint64, error) {
	evs, err := w.load(ctx, domain.DeliveryStream(id))
	if err != nil {
		return 0, err
	}
	d := domain.LoadDelivery(evs)
	if err := cmd(d); err != nil {
		return 0, err
	}
	if len(d.Changes()) == 0 {
		return 0, errors.New("delivery command raised no event")
	}
	return w.save(ctx, domain.DeliveryStream(id), d.Expected(), at, d.Changes()...)
}

func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func request(target, body string) domain.CapturedRequest {
	return domain.CapturedRequest{
		Method: "POST", Target: target, Host: "x.localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:5555",
		Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Sig", Value: "a"}, {Name: "X-Sig", Value: "b"}},
		Body:    []byte(body), BodySize: int64(len(body)), Complete: true,
	}
}

// env is a real event store and views in a temp dir, with Run going.
type env struct {
	writer
	t     testing.TB
	ctx   context.Context
	dir   string
	views *Runner
	stop  func()
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	e := &env{writer: writer{store: store, codec: domain.NewCodec()}, t: t, ctx: ctx, dir: dir}
	e.views = e.open("views.db", opts)
	e.stop = e.run(e.views)
	return e
}

// with returns the env reporting to t (a subtest).
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// open opens a views file in the env's dir; it is closed at cleanup.
func (e *env) open(name string, opts Options) *Runner {
	e.t.Helper()
	v, err := Open(e.ctx, filepath.Join(e.dir, name), e.store, opts)
	if err != nil {
		e.t.Fatalf("open views: %v", err)
	}
	e.t.Cleanup(func() {
		if err := v.Close(); err != nil {
			e.t.Errorf("close views: %v", err)
		}
	})
	return v
}

// run starts v.Run; the returned stop (also run at cleanup) cancels it and
// checks that it ended cleanly.
func (e *env) run(v *Runner) func() {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- v.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// must fails the test on err and returns the position.
func (e *env) must(pos uint64, err error) uint64 {
	e.t.Helper()
	if err != nil {
		e.t.Fatal(err)
	}
	return pos
}

// sync waits until v has applied the whole log.
func (e *env) sync(v *Runner) {
	e.t.Helper()
	last, err := e.store.LastPosition(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitFor(v, last)
}

func (e *env) waitFor(v *Runner, pos uint64) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout)
	defer cancel()
	if err := v.WaitFor(ctx, pos); err != nil {
		e.t.Fatalf("WaitFor(%d), at %d: %v", pos, v.Position(), err)
	}
}

// do appends through fn and waits until the views applied it, so each call
// is its own batch.
func (e *env) do(pos uint64, err error) uint64 {
	e.t.Helper()
	e.must(pos, err)
	e.waitFor(e.views, pos)
	return pos
}

func (e *env) delivery(id string) readmodel.Delivery {
	e.t.Helper()
	d, err := e.views.Delivery(e.ctx, id)
	if err != nil {
		e.t.Fatalf("Delivery(%s): %v", id, err)
	}
	return d
}

// dump returns every row of every view table, in primary-key order, as
// text: two views are identical exactly when their dumps are.
func dump(t *testing.T, v *Runner) map[string][]string {
	t.Helper()
	ctx := t.Context()
	out := map[string][]string{}
	tables := append([]string(nil), viewTables...)
	sort.Strings(tables)
	for _, table := range tables {
		rows, err := v.r.QueryContext(ctx, "SELECT * FROM "+table)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		lines := []string{}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fields := make([]string, len(cols))
			for i, val := range vals {
				fields[i] = fmt.Sprintf("%s=%#v", cols[i], val)
			}
			lines = append(lines, strings.Join(fields, " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		sort.Strings(lines)
		out[table] = lines
	}
	return out
}

// compareDumps reports every difference between two dumps.
func compareDumps(t *testing.T, name string, want, got map[string][]string) {
	t.Helper()
	for table, w := range want {
		g := got[table]
		if len(w) != len(g) {
			t.Errorf("%s: table %s has %d rows, want %d", name, table, len(g), len(w))
			continue
		}
		for i := range w {
			if w[i] != g[i] {
				t.Errorf("%s: table %s row %d:\n got %s\nwant %s", name, table, i, g[i], w[i])
			}
		}
	}
}

// recvChange returns the next change or fails after waitTimeout.
func recvChange(t *testing.T, ch <-chan readmodel.Change) readmodel.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return c
	case <-time.After(waitTimeout):
		t.Fatal("no change arrived")
	}
	return readmodel.Change{}
}

func status(p *int) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// histories reads every delivery of v as the API gives it, headers and
// bodies from the log included: each address's history page by page, and
// each delivery again on its own, which must agree with its page.
func histories(t *testing.T, v *Runner) map[string]readmodel.Delivery {
	t.Helper()
	ctx := t.Context()
	rows, err := v.r.QueryContext(ctx, "SELECT DISTINCT address FROM deliveries ORDER BY address")
	if err != nil {
		t.Fatal(err)
	}
	var addresses []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		addresses = append(addresses, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	out := map[string]readmodel.Delivery{}
	for _, address := range addresses {
		after := ""
		for {
			p, err := v.Deliveries(ctx, address, 7, after)
			if err != nil {
				t.Fatalf("Deliveries(%s): %v", address, err)
			}
			for _, d := range p.Items {
				one, err := v.Delivery(ctx, d.ID)
				if err != nil {
					t.Fatalf("Delivery(%s): %v", d.ID, err)
				}
				if !reflect.DeepEqual(one, d) {
					t.Errorf("Delivery(%s) = %+v\nits page holds %+v", d.ID, one, d)
				}
				out[d.ID] = d
			}
			if !p.HasNextPage {
				break
			}
			after = p.EndCursor
		}
	}
	return out
}

// compareHistories reports every delivery that differs between two views.
func compareHistories(t *testing.T, name string, want, got map[string]readmodel.Delivery) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d deliveries, want %d", name, len(got), len(want))
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: delivery %s =\n %+v\nwant %+v", name, id, g, w)
		}
	}
}
