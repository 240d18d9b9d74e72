package jetstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/storetest"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/natstest"
)

// guard bounds each test's calls; a safety net, not a timing assertion.
const guard = 30 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return ctx
}

var (
	streams atomic.Int64
	run     = uuid.NewString()[:8] // tells this process's streams from earlier runs' on a kept server
)

// freshOptions names a JetStream stream and subject prefix no other store
// uses, so every store starts with an empty log. A request lost in a server
// restart is tried again after a second.
func freshOptions() Options {
	n := streams.Add(1)
	return Options{Stream: fmt.Sprintf("T%s_%d", run, n), Subject: fmt.Sprintf("t%s.%d", run, n), Attempt: time.Second}
}

func openStore(t *testing.T, srv interface{ URL() string }, opts Options) *Store {
	t.Helper()
	s, err := Open(testContext(t), srv.URL(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the shared suite against an embedded server. Each
// store gets its own JetStream stream; a reopen also restarts the server on
// the same store folder, so the restart test covers the server's recovery.
func TestConformance(t *testing.T) {
	srv := natstest.Start(t)
	runConformance(t, srv.URL(), freshOptions, srv.Restart)
}

// TestConformanceCluster runs the suite against an R3 stream on a cluster
// of three embedded servers: conflicts come as error 10164 there, and the
// servers check duplicates before expected sequences.
func TestConformanceCluster(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	runConformance(t, c.URL(), clusterOptions, nil)
}

// TestConformanceExternal runs the suite against a server of another
// version, named by RELAY_NATS_URL (e.g. Debian's nats-server 2.9.10 started
// with -js); each store gets its own JetStream stream there.
func TestConformanceExternal(t *testing.T) {
	url := os.Getenv("RELAY_NATS_URL")
	if url == "" {
		t.Skip("RELAY_NATS_URL is not set: set it to a NATS server with JetStream (nats://host:4222) to run the conformance suite against it too (the embedded server's run is above)")
	}
	runConformance(t, url, freshOptions, nil)
}

// runConformance runs storetest against the server at url, each store on
// a stream of its own (options), reopening on the same stream; restart,
// when set, restarts the server between a close and the reopen.
func runConformance(t *testing.T, url string, options func() Options, restart func()) {
	opened := map[domain.EventStore]Options{}
	open := func(t *testing.T, opts Options) domain.EventStore {
		t.Helper()
		s, err := Open(testContext(t), url, opts)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		opened[s] = opts
		return s
	}
	storetest.Run(t, storetest.Factory{
		Open: func(t *testing.T) domain.EventStore { return open(t, options()) },
		Reopen: func(t *testing.T, old domain.EventStore) domain.EventStore {
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if restart != nil {
				restart()
			}
			return open(t, opened[old])
		},
		// Positions have gaps (each message owns a slot of 1000); IDs are
		// checked at the place of a retry, and across the log only within
		// the duplicate window.
		Guarantees: storetest.Guarantees{EmptyOnOpen: true, StreamReadPositions: true},
	})
}

func clusterOptions() Options {
	o := freshOptions()
	o.Replicas = 3
	return o
}

func newEvent(label string) domain.EventData {
	return domain.EventData{ID: uuid.NewString(), Type: "test.happened.v1", Data: []byte(fmt.Sprintf(`{"label":%q}`, label))}
}

func mustAppend(t *testing.T, s *Store, stream string, expected domain.ExpectedRevision, events ...domain.EventData) domain.AppendResult {
	t.Helper()
	res, err := s.Append(testContext(t), stream, expected, events...)
	if err != nil {
		t.Fatalf("Append(%s, %s): %v", stream, expected, err)
	}
	return res
}

// TestRetryAfterLostReply stores an append exactly as Append sends it but
// drops the server's answer, as a lost reply or a crash before it would,
// and then retries it through Append with the same event IDs: the retry
// must answer what the first append would have, and write nothing.
func TestRetryAfterLostReply(t *testing.T) {
	t.Run("one server", func(t *testing.T) { retryAfterLostReply(t, openStore(t, natstest.Start(t), freshOptions())) })
	t.Run("R3 on three servers", func(t *testing.T) {
		retryAfterLostReply(t, openStore(t, natstest.StartCluster(t, 3), clusterOptions()))
	})
	if url := os.Getenv("RELAY_NATS_URL"); url != "" {
		t.Run("RELAY_NATS_URL", func(t *testing.T) { retryAfterLostReply(t, openStore(t, externalServer(url), freshOptions())) })
	}
}

// externalServer is a server the test did not start (see
// TestConformanceExternal).
type externalServer string

func (u externalServer) URL() string { return string(u) }

func retryAfterLostReply(t *testing.T, s *Store) {
	ctx := testContext(t)

	tests := []struct {
		name     string
		prior    int  // events already in the stream
		later    bool // another append follows the lost one
		expected func() domain.ExpectedRevision
		want     uint64 // NextRevision of the lost append
	}{
		{"no stream", 0, false, domain.NoStream, 1},
		{"no stream, stream moved on", 0, true, domain.NoStream, 1},
		{"exact", 2, false, func() domain.ExpectedRevision { return domain.Exact(1) }, 3},
		{"exact, stream moved on", 2, true, func() domain.ExpectedRevision { return domain.Exact(1) }, 3},
		{"any", 2, false, domain.Any, 3},
		{"any, stream moved on", 2, true, domain.Any, 3}, // within the duplicate window
		{"stream exists", 1, false, domain.StreamExists, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := "retry-" + uuid.NewString()
			var h head
			if tt.prior > 0 {
				var events []domain.EventData
				for i := range tt.prior {
					events = append(events, newEvent(fmt.Sprint("prior", i)))
				}
				res := mustAppend(t, s, stream, domain.NoStream(), events...)
				h = head{exists: true, seq: res.Position / positionSlot, first: 0, last: res.NextRevision}
			}
			lost := []domain.EventData{newEvent("lost-a"), newEvent("lost-b")}
			seq, ok := expectedSubjectSeq(tt.expected(), h)
			if !ok {
				t.Fatalf("expectedSubjectSeq refused the first attempt")
			}
			ack, err := s.publish(ctx, s.subjectOf(stream), batch{stream: stream, revision: h.nextRevision(), events: lost}, evidence.Hash{}, seq)
			if err != nil {
				t.Fatalf("first attempt: %v", err)
			}
			want := domain.AppendResult{NextRevision: tt.want, Position: position(ack.Sequence, 1, 2)}
			if tt.later {
				mustAppend(t, s, stream, domain.Any(), newEvent("later"))
			}
			before := mustLast(t, s)

			got, err := s.Append(ctx, stream, tt.expected(), lost...)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if got != want {
				t.Fatalf("retry = %+v, want %+v", got, want)
			}
			if last := mustLast(t, s); last != before {
				t.Fatalf("LastPosition %d after the retry, was %d: the retry wrote", last, before)
			}
			evs, err := s.ReadStream(ctx, stream, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range evs {
				if e.ID == lost[0].ID {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("the stream holds the lost append %d times", n)
			}
		})
	}
}

func mustLast(t *testing.T, s *Store) uint64 {
	t.Helper()
	last, err := s.LastPosition(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// TestReusedIDWithinWindow: the server's duplicate window spans the whole
// JetStream stream, so an event ID reused elsewhere shortly after is refused
// as a duplicate rather than taken for a retry.
func TestReusedIDWithinWindow(t *testing.T) {
	srv := natstest.Start(t)
	s := openStore(t, srv, freshOptions())
	e := newEvent("used")
	a := "dup-" + uuid.NewString()
	mustAppend(t, s, a, domain.NoStream(), e)
	before := mustLast(t, s)
	tests := []struct {
		name     string
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
	}{
		{"another stream", "dup-" + uuid.NewString(), domain.NoStream(), []domain.EventData{e}},
		{"another stream with Any", "dup-" + uuid.NewString(), domain.Any(), []domain.EventData{e}},
		{"same stream, used ID first", a, domain.Exact(0), []domain.EventData{e, newEvent("new")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Append(testContext(t), tt.stream, tt.expected, tt.events...); !errors.Is(err, domain.ErrDuplicateEventID) {
				t.Fatalf("Append = %v, want ErrDuplicateEventID", err)
			}
		})
	}
	if last := mustLast(t, s); last != before {
		t.Fatalf("LastPosition = %d, want %d: a refused append wrote", last, before)
	}
}

// TestSubscribeInsideMessage subscribes after the first event of a
// three-event append: the other two follow, then live events.
func TestSubscribeInsideMessage(t *testing.T) {
	srv := natstest.Start(t)
	s := openStore(t, srv, freshOptions())
	ctx := testContext(t)
	stream := "inside-" + uuid.NewString()
	events := []domain.EventData{newEvent("0"), newEvent("1"), newEvent("2")}
	res := mustAppend(t, s, stream, domain.NoStream(), events...)
	all, err := s.ReadAll(ctx, 0, 10)
	if err != nil || len(all) != 3 || all[2].Position != res.Position {
		t.Fatalf("ReadAll = %+v, %v", all, err)
	}

	sub, err := s.SubscribeAll(ctx, all[0].Position)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	live := newEvent("live")
	mustAppend(t, s, stream, domain.Exact(2), live)
	got := recvN(t, sub, 3)
	for i, want := range []string{events[1].ID, events[2].ID, live.ID} {
		if got[i].ID != want {
			t.Fatalf("event %d = %s, want %s", i, got[i].ID, want)
		}
	}
	if got[0].Position != all[1].Position || got[1].Position != all[2].Position || got[2].Position <= got[1].Position {
		t.Fatalf("positions %d %d %d", got[0].Position, got[1].Position, got[2].Position)
	}
}

func recvN(t *testing.T, sub domain.Subscription, n int) []domain.RecordedEvent {
	t.Helper()
	var got []domain.RecordedEvent
	for len(got) < n {
		batch, err := sub.Recv(testContext(t))
		if err != nil {
			t.Fatalf("Recv after %d events: %v", len(got), err)
		}
		got = append(got, batch...)
	}
	if len(got) != n {
		t.Fatalf("received %d events, want %d", len(got), n)
	}
	return got
}

// TestServerRestartUnderOpenStore restarts the server while a store and a
// subscription stay open: the client reconnects, the log and its positions
// are unchanged, and the subscription carries on with the next event.
func TestServerRestartUnderOpenStore(t *testing.T) {
	srv := natstest.Start(t)
	s := openStore(t, srv, freshOptions())
	ctx := testContext(t)
	stream := "restart-" + uuid.NewString()
	first := mustAppend(t, s, stream, domain.NoStream(), newEvent("0"), newEvent("1"))
	sub, err := s.SubscribeAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	recvN(t, sub, 2)

	srv.Restart()

	if last := mustLast(t, s); last != first.Position {
		t.Fatalf("LastPosition after the restart = %d, want %d", last, first.Position)
	}
	next := newEvent("2")
	res := mustAppend(t, s, stream, domain.Exact(1), next)
	if res.NextRevision != 2 || res.Position <= first.Position {
		t.Fatalf("append after the restart = %+v, want revision 2 after position %d", res, first.Position)
	}
	if got := recvN(t, sub, 1); got[0].ID != next.ID || got[0].Position != res.Position {
		t.Fatalf("subscription after the restart got %s at %d, want %s at %d", got[0].ID, got[0].Position, next.ID, res.Position)
	}
}

func TestSentinelFor(t *testing.T) {
	tests := []struct {
		code natsjs.ErrorCode
		want error
	}{
		{natsjs.JSErrCodeStreamWrongLastSequence, domain.ErrWrongExpectedRevision},
		{natsjs.JSErrCodeStreamWrongLastSequenceConstant, domain.ErrWrongExpectedRevision},
		{10071, domain.ErrWrongExpectedRevision},
		{10164, domain.ErrWrongExpectedRevision},
		{natsjs.JSErrCodeStreamNotFound, ErrStreamMissing},
		{10070, nil}, // wrong last msg ID: the adapter never sends that header
		{natsjs.JSErrCodeMessageNotFound, nil},
		{natsjs.JSErrCodeBadRequest, nil},
	}
	for _, tt := range tests {
		if got := sentinelFor(tt.code); got != tt.want {
			t.Errorf("sentinelFor(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestTranslate(t *testing.T) {
	conflict := &natsjs.APIError{Code: 400, ErrorCode: natsjs.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 4"}
	plain := errors.New("boom")
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		is   []error
		not  []error
	}{
		{"nil", t.Context(), nil, nil, nil},
		{"conflict as the client wraps it", t.Context(), fmt.Errorf("nats: %w", conflict), []error{domain.ErrWrongExpectedRevision, conflict}, nil},
		{"other API error", t.Context(), &natsjs.APIError{ErrorCode: natsjs.JSErrCodeBadRequest}, nil, []error{domain.ErrWrongExpectedRevision}},
		{"closed connection", t.Context(), nats.ErrConnectionClosed, []error{ErrClosed}, nil},
		{"client timeout", t.Context(), nats.ErrTimeout, []error{context.DeadlineExceeded}, nil},
		{"not a client error", t.Context(), plain, []error{plain}, []error{domain.ErrWrongExpectedRevision}},
		{"ended context", cancelled, plain, []error{context.Canceled, plain}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(tt.ctx, tt.err)
			if (got == nil) != (tt.err == nil) {
				t.Fatalf("translate(%v) = %v", tt.err, got)
			}
			for _, want := range tt.is {
				if !errors.Is(got, want) {
					t.Fatalf("translate(%v) = %v, want it to wrap %v", tt.err, got, want)
				}
			}
			for _, not := range tt.not {
				if errors.Is(got, not) {
					t.Fatalf("translate(%v) = %v, classified as %v", tt.err, got, not)
				}
			}
		})
	}
}

// TestOpenFailsWithoutServer points at a port nothing listens on: Open must
// fail within its context, without the password in its error.
func TestOpenFailsWithoutServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, "nats://relay:s3cret@127.0.0.1:1", Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded without a server")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error repeats the password: %v", err)
	}
}

// TestReplicasFollowTheCluster: a stream created without ?replicas= has one
// replica per server of a cluster (at most three), and one on a single
// server; an explicit count is kept.
func TestReplicasFollowTheCluster(t *testing.T) {
	cluster := natstest.StartCluster(t, 3)
	single := natstest.Start(t)
	for _, tt := range []struct {
		name     string
		srv      interface{ URL() string }
		replicas int
		want     int
	}{
		{"cluster, no count", cluster, 0, 3},
		{"cluster, replicas=1", cluster, 1, 1},
		{"single server", single, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := freshOptions()
			opts.Replicas = tt.replicas
			s := openStore(t, tt.srv, opts)
			if got := s.stream.CachedInfo().Config.Replicas; got != tt.want {
				t.Errorf("stream created with %d replicas, want %d", got, tt.want)
			}
		})
	}
}
