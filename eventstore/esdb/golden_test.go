package esdb

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"

	"github.com/relayhq/relay/domain"
)

var update = flag.Bool("update", false, "rewrite golden files")

// capturedStreams is EventStoreDB's streams service as the client module
// generates it (api.StreamsServer), answering every append with success
// and keeping what the client sent. Reads find nothing. It runs on a local
// listener, so the real client and adapter are checked without a server.
type capturedStreams struct {
	api.UnimplementedStreamsServer
	mu         sync.Mutex
	requests   []string // one rendering per call, in order
	commit     uint64
	conflictOn string // a stream whose appends are refused as a wrong expected version
}

func (c *capturedStreams) Read(*api.ReadReq, api.Streams_ReadServer) error { return nil }

func (c *capturedStreams) Append(s api.Streams_AppendServer) error {
	var b strings.Builder
	var stream string
	events := uint64(0)
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if o := req.GetOptions(); o != nil {
			stream = string(o.GetStreamIdentifier().GetStreamName())
			fmt.Fprintf(&b, "append %s expected=%s\n", stream, renderExpected(o))
			continue
		}
		m := req.GetProposedMessage()
		keys := make([]string, 0, len(m.GetMetadata()))
		for k := range m.GetMetadata() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintf(&b, "  event id=%s", renderUUID(m.GetId()))
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, m.GetMetadata()[k])
		}
		fmt.Fprintf(&b, "\n    metadata=%s\n    data=%q\n", m.GetCustomMetadata(), m.GetData())
		events++
	}
	c.mu.Lock()
	c.requests = append(c.requests, b.String())
	c.commit += 100
	commit := c.commit
	refuse := stream == c.conflictOn
	c.mu.Unlock()
	if refuse {
		return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_WrongExpectedVersion_{
			WrongExpectedVersion: &api.AppendResp_WrongExpectedVersion{
				CurrentRevisionOption: &api.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: 7},
			}}})
	}
	return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
		CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: events - 1},
		PositionOption:        &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{CommitPosition: commit, PreparePosition: commit}},
	}}})
}

func (c *capturedStreams) Tombstone(_ context.Context, req *api.TombstoneReq) (*api.TombstoneResp, error) {
	o := req.GetOptions()
	expected := "any"
	switch e := o.GetExpectedStreamRevision().(type) {
	case *api.TombstoneReq_Options_Revision:
		expected = fmt.Sprint(e.Revision)
	case *api.TombstoneReq_Options_NoStream:
		expected = "no_stream"
	case *api.TombstoneReq_Options_StreamExists:
		expected = "stream_exists"
	}
	c.mu.Lock()
	c.requests = append(c.requests, fmt.Sprintf("tombstone %s expected=%s\n", o.GetStreamIdentifier().GetStreamName(), expected))
	c.commit += 100
	commit := c.commit
	c.mu.Unlock()
	return &api.TombstoneResp{PositionOption: &api.TombstoneResp_Position_{Position: &api.TombstoneResp_Position{CommitPosition: commit, PreparePosition: commit}}}, nil
}

func renderExpected(o *api.AppendReq_Options) string {
	switch e := o.GetExpectedStreamRevision().(type) {
	case *api.AppendReq_Options_Revision:
		return fmt.Sprint(e.Revision)
	case *api.AppendReq_Options_NoStream:
		return "no_stream"
	case *api.AppendReq_Options_StreamExists:
		return "stream_exists"
	case *api.AppendReq_Options_Any:
		return "any"
	}
	return "none"
}

func renderUUID(u *shared.UUID) string {
	if s := u.GetString_(); s != "" {
		return s
	}
	st := u.GetStructured()
	var b [16]byte
	for i := range 8 {
		b[i] = byte(uint64(st.GetMostSignificantBits()) >> (56 - 8*i))
		b[8+i] = byte(uint64(st.GetLeastSignificantBits()) >> (56 - 8*i))
	}
	return uuid.UUID(b).String()
}

// serveCaptured runs the captured streams service on 127.0.0.1 and opens
// the adapter, with the real client, on it.
func serveCaptured(t *testing.T) (*Store, *capturedStreams) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	streams := &capturedStreams{conflictOn: "endpoint-taken"}
	api.RegisterStreamsServer(srv, streams)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	s, err := Open(t.Context(), "esdb://"+ln.Addr().String()+"?tls=false", Options{})
	if err != nil {
		t.Fatalf("open on the captured service: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, streams
}

// TestAppendRequestsGolden checks what the real client sends for the
// adapter's appends and deletes: each expected revision of the port as the
// server's, the event IDs as given, the type and content type, the trace
// metadata, the data byte for byte. The conformance suite against a real
// server runs only where RELAY_EVENTSTORE_URL names one.
func TestAppendRequestsGolden(t *testing.T) {
	s, streams := serveCaptured(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	event := func(id, typ, data string) domain.EventData {
		return domain.EventData{ID: id, Type: typ, Data: []byte(data), Metadata: domain.Metadata{
			SchemaVersion: 1, OccurredAt: at, CorrelationID: "d1", CausationID: "01a00000-0000-7000-8000-000000000001"}}
	}
	ctx := t.Context()
	for _, a := range []struct {
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
	}{
		{"delivery-d1", domain.NoStream(), []domain.EventData{
			event("01a00000-0000-7000-8000-000000000001", "delivery.received.v1", `{"delivery_id":"d1"}`),
			event("01a00000-0000-7000-8000-000000000002", "forward.requested.v1", `{"delivery_id":"d1","attempt_id":"a1","node":"b"}`),
		}},
		{"delivery-d1", domain.Exact(1), []domain.EventData{
			event("01a00000-0000-7000-8000-000000000003", "forward.failed.v1", `{"delivery_id":"d1","attempt_id":"a1","status":503,"error":"relay node lost"}`),
		}},
		{"agent-ep1", domain.Any(), []domain.EventData{
			event("01a00000-0000-7000-8000-000000000004", "agent.connected.v1", `{"endpoint_id":"ep1","agent_id":"ag","node":"b"}`),
		}},
		{"account-x", domain.StreamExists(), []domain.EventData{
			event("01a00000-0000-7000-8000-000000000005", "raw.bytes.v1", "\x00not json"),
		}},
	} {
		if _, err := s.Append(ctx, a.stream, a.expected, a.events...); err != nil {
			t.Fatalf("append to %s: %v", a.stream, err)
		}
	}
	_, err := s.Append(ctx, "endpoint-taken", domain.Exact(3), event("01a00000-0000-7000-8000-000000000006", "endpoint.created.v1", `{}`))
	if !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Errorf("a refused append: %v, want ErrWrongExpectedRevision", err)
	}
	if _, err := s.DeleteStream(ctx, "delivery-d1", domain.Exact(2)); err != nil {
		t.Fatalf("delete: %v", err)
	}

	streams.mu.Lock()
	got := strings.Join(streams.requests, "")
	streams.mu.Unlock()
	golden := filepath.Join("testdata", "requests.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./eventstore/esdb -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("requests differ from %s:\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}
