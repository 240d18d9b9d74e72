package esdb

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
)

// memStreams is a small stand-in for EventStoreDB's streams service, as
// this adapter uses it: appends with an expected revision (refused as a
// wrong expected version, or recognised as a retry at the same place),
// forward and backward reads of a stream and of $all, and tombstones. It
// keeps what it stores in memory. It is what the adapter's reads and
// writes are run against here, through the real client; it is not the
// server, whose behaviour only TestConformance and TestChainOnAServer
// check.
type memStreams struct {
	api.UnimplementedStreamsServer
	mu      sync.Mutex
	all     []*api.ReadResp_ReadEvent_RecordedEvent
	deleted map[string]bool
	commit  uint64
	// unplaced: stream reads report no commit positions, as some servers
	// do.
	unplaced bool
}

func (m *memStreams) stream(name string) []*api.ReadResp_ReadEvent_RecordedEvent {
	var out []*api.ReadResp_ReadEvent_RecordedEvent
	for _, r := range m.all {
		if string(r.StreamIdentifier.StreamName) == name && r.Metadata["type"] != serverTombstone {
			out = append(out, r)
		}
	}
	return out
}

func sameID(a, b *shared.UUID) bool {
	return a.GetStructured().GetMostSignificantBits() == b.GetStructured().GetMostSignificantBits() &&
		a.GetStructured().GetLeastSignificantBits() == b.GetStructured().GetLeastSignificantBits()
}

func (m *memStreams) store(name string, first uint64, typ string, msgs []*api.AppendReq_ProposedMessage) uint64 {
	m.commit += 1000
	for i, p := range msgs {
		t := typ
		if t == "" {
			t = p.Metadata["type"]
		}
		m.all = append(m.all, &api.ReadResp_ReadEvent_RecordedEvent{Id: p.Id, StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(name)},
			StreamRevision: first + uint64(i), PreparePosition: m.commit + uint64(i), CommitPosition: m.commit,
			Metadata:       map[string]string{"type": t, "content-type": p.Metadata["content-type"], "created": "0"},
			CustomMetadata: p.CustomMetadata, Data: p.Data})
	}
	return m.commit
}

// expect checks an expectation against a stream of n events: ok to write,
// or a retry of the append already at that place.
func (m *memStreams) expect(events []*api.ReadResp_ReadEvent_RecordedEvent, want any, first *api.AppendReq_ProposedMessage) (ok, retry bool) {
	n := uint64(len(events))
	switch w := want.(type) {
	case *api.AppendReq_Options_NoStream, *api.TombstoneReq_Options_NoStream:
		if n > 0 && first != nil && sameID(events[0].Id, first.Id) {
			return false, true
		}
		return n == 0, false
	case *api.AppendReq_Options_Revision:
		if n > w.Revision+1 && first != nil && sameID(events[w.Revision+1].Id, first.Id) {
			return false, true
		}
		return n == w.Revision+1, false
	case *api.TombstoneReq_Options_Revision:
		return n == w.Revision+1, false
	case *api.AppendReq_Options_StreamExists, *api.TombstoneReq_Options_StreamExists:
		return n > 0, false
	}
	return true, false // any
}

func (m *memStreams) Append(s api.Streams_AppendServer) error {
	var opts *api.AppendReq_Options
	var msgs []*api.AppendReq_ProposedMessage
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if o := req.GetOptions(); o != nil {
			opts = o
		} else {
			msgs = append(msgs, req.GetProposedMessage())
		}
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	m.mu.Lock()
	defer m.mu.Unlock()
	events := m.stream(name)
	ok, retry := m.expect(events, opts.GetExpectedStreamRevision(), msgs[0])
	switch {
	case retry:
		return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
			CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(len(events) - 1)},
			PositionOption:        &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{CommitPosition: events[len(events)-1].CommitPosition}},
		}}})
	case !ok || m.deleted[name]:
		return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_WrongExpectedVersion_{
			WrongExpectedVersion: &api.AppendResp_WrongExpectedVersion{
				CurrentRevisionOption: &api.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(len(events)) - 1},
			}}})
	}
	commit := m.store(name, uint64(len(events)), "", msgs)
	return s.SendAndClose(&api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
		CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(len(events) + len(msgs) - 1)},
		PositionOption:        &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{CommitPosition: commit, PreparePosition: commit}},
	}}})
}

func (m *memStreams) Tombstone(_ context.Context, req *api.TombstoneReq) (*api.TombstoneResp, error) {
	o := req.GetOptions()
	name := string(o.GetStreamIdentifier().GetStreamName())
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok, _ := m.expect(m.stream(name), o.GetExpectedStreamRevision(), nil); !ok {
		return nil, errors.New("wrong expected version")
	}
	if m.deleted == nil {
		m.deleted = map[string]bool{}
	}
	m.deleted[name] = true
	id := &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{MostSignificantBits: int64(m.commit + 1), LeastSignificantBits: 7}}}
	commit := m.store(name, math.MaxInt64, serverTombstone, []*api.AppendReq_ProposedMessage{{Id: id, Metadata: map[string]string{}}})
	return &api.TombstoneResp{PositionOption: &api.TombstoneResp_Position_{Position: &api.TombstoneResp_Position{CommitPosition: commit, PreparePosition: commit}}}, nil
}

func (m *memStreams) Read(req *api.ReadReq, s api.Streams_ReadServer) error {
	o := req.GetOptions()
	back := o.GetReadDirection() == api.ReadReq_Options_Backwards
	m.mu.Lock()
	var events []*api.ReadResp_ReadEvent_RecordedEvent
	if st := o.GetStream(); st != nil {
		name := string(st.GetStreamIdentifier().GetStreamName())
		all := m.stream(name)
		if len(all) == 0 {
			m.mu.Unlock()
			return s.Send(&api.ReadResp{Content: &api.ReadResp_StreamNotFound_{StreamNotFound: &api.ReadResp_StreamNotFound{StreamIdentifier: st.GetStreamIdentifier()}}})
		}
		from := uint64(0)
		switch r := st.GetRevisionOption().(type) {
		case *api.ReadReq_Options_StreamOptions_Revision:
			from = r.Revision
		case *api.ReadReq_Options_StreamOptions_End:
			from = math.MaxUint64
		}
		for _, e := range all {
			if m.unplaced {
				c := proto.Clone(e).(*api.ReadResp_ReadEvent_RecordedEvent)
				c.CommitPosition, c.PreparePosition = unknownPosition, unknownPosition
				e = c
			}
			if back && e.StreamRevision <= from || !back && e.StreamRevision >= from {
				events = append(events, e)
			}
		}
	} else {
		a := o.GetAll()
		from := [2]uint64{}
		switch p := a.GetAllOption().(type) {
		case *api.ReadReq_Options_AllOptions_Position:
			from = [2]uint64{p.Position.CommitPosition, p.Position.PreparePosition}
		case *api.ReadReq_Options_AllOptions_End:
			from = [2]uint64{math.MaxUint64, math.MaxUint64}
		}
		for _, e := range m.all {
			at := [2]uint64{e.CommitPosition, e.PreparePosition}
			after := at[0] > from[0] || at[0] == from[0] && at[1] >= from[1]
			before := at[0] < from[0] || at[0] == from[0] && at[1] <= from[1]
			if back && before || !back && after {
				events = append(events, e)
			}
		}
	}
	m.mu.Unlock()
	if back {
		for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
			events[i], events[j] = events[j], events[i]
		}
	}
	for i, e := range events {
		if uint64(i) == o.GetCount() {
			break
		}
		err := s.Send(&api.ReadResp{Content: &api.ReadResp_Event{Event: &api.ReadResp_ReadEvent{Event: e,
			Position: &api.ReadResp_ReadEvent_CommitPosition{CommitPosition: e.CommitPosition}}}})
		if err != nil {
			return err
		}
	}
	return nil
}

// serveMem runs memStreams on 127.0.0.1 and opens the adapter on it.
func serveMem(t *testing.T, streams *memStreams) *Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	api.RegisterStreamsServer(srv, streams)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	s, err := Open(t.Context(), "esdb://"+ln.Addr().String()+"?tls=false", Options{})
	if err != nil {
		t.Fatalf("open on the in-memory service: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestChainThroughTheClient runs the adapter's chained appends, deletion,
// Messages, LastPosition and LastEvent through the real client against
// memStreams: the log verifies with a checkpoint kept from before a
// deletion, a delivery is proved, the port's reads hide the deletion's
// record, and an event appended past the adapter is named.
func TestChainThroughTheClient(t *testing.T) {
	ctx := t.Context()
	s := serveMem(t, &memStreams{})
	pub, key, _ := ed25519.GenerateKey(nil)
	twice := []domain.EventData{chainEvent("forward.requested.v1", `{"n":1}`), chainEvent("forward.responded.v1", `{"status":200}`)}
	for _, step := range []struct {
		stream   string
		expected domain.ExpectedRevision
		events   []domain.EventData
	}{
		{"delivery-a", domain.NoStream(), []domain.EventData{chainEvent("delivery.received.v1", `{"body":"aGk="}`)}},
		{"delivery-a", domain.Exact(0), twice},
		{"delivery-b", domain.Any(), []domain.EventData{chainEvent("delivery.received.v1", `{"body":"eW8="}`)}},
		{"delivery-a", domain.Any(), twice}, // a retry: written once
		{"delivery-b", domain.StreamExists(), []domain.EventData{chainEvent("forward.requested.v1", `{"n":2}`)}},
	} {
		if _, err := s.Append(ctx, step.stream, step.expected, step.events...); err != nil {
			t.Fatalf("append to %s: %v", step.stream, err)
		}
	}
	if _, err := s.Append(ctx, "delivery-b", domain.Exact(0), chainEvent("forward.requested.v1", `{}`)); !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Fatalf("an append behind the head: %v", err)
	}
	if evs, err := s.ReadStream(ctx, "delivery-a", 0, 10); err != nil || len(evs) != 3 {
		t.Fatalf("delivery-a after a retried append: %d events, %v", len(evs), err)
	}
	sign := func() evidence.Checkpoint {
		t.Helper()
		pos, err := s.LastPosition(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var signer evidence.HeadsSigner
		if err := signer.Advance(ctx, s, pos); err != nil {
			t.Fatal(err)
		}
		c := signer.Sign(key)
		if _, err := s.Append(ctx, domain.CheckpointStream, domain.Any(), chainEvent(domain.TypeLogCheckpointed,
			`{"position":`+itoa(c.Position)+`,"tree_size":`+itoa(c.TreeSize)+`,"root":"`+c.Root+`","signature":"`+c.Signature+`","chain":"`+c.Chain+`"}`)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	kept := sign()
	if _, err := s.DeleteStream(ctx, "delivery-a", domain.Any()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "delivery-b", domain.Any(), chainEvent("forward.responded.v1", `{"status":201}`)); err != nil {
		t.Fatal(err)
	}
	c := sign()
	// memStreams keeps a deleted stream's events in $all (a server may
	// until a scavenge; TestChainVerifiesOverWhatTheAdapterWrites has
	// both): 3 of delivery-a, its tombstone, 3 of delivery-b, 2
	// checkpoints.
	r, err := evidence.VerifyStreams(ctx, s, evidence.Options{PublicKey: pub, Kept: []evidence.Checkpoint{kept}})
	if err != nil || !r.OK() || r.Deletions != 1 || r.Removed != 3 || r.Checkpoints != 2 || r.Events != 9 {
		t.Fatalf("verify: %+v, %v", r, err)
	}
	last, err := s.LastEvent(ctx, domain.CheckpointStream)
	if err != nil || last.Type != domain.TypeLogCheckpointed || last.Position <= c.Position {
		t.Fatalf("LastEvent of the checkpoints: %+v, %v", last, err)
	}
	p, err := evidence.ProveStream(ctx, s, "delivery-b", c, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.VerifyStreamProof(p, pub); err != nil || len(p.Events) != 3 {
		t.Fatalf("a proof of delivery-b: %d events, %v", len(p.Events), err)
	}
	all, err := s.ReadAll(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.Stream == removedStream("delivery-a") {
			t.Fatal("ReadAll hands out the deletion's record")
		}
	}

	plain, _ := toProposed([]domain.EventData{chainEvent("forward.failed.v1", `{}`)})
	if _, err := s.client.AppendToStream(ctx, "delivery-b", esdbRevision(2), plain...); err != nil {
		t.Fatal(err)
	}
	r, err = evidence.VerifyStreams(ctx, s, evidence.Options{PublicKey: pub})
	if err != nil || r.OK() || r.Problems[0].Kind != evidence.EventInserted || r.Problems[0].Stream != "delivery-b" {
		t.Fatalf("verify after an append past the adapter: %+v, %v", r.Problems, err)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func esdbRevision(r uint64) esdb.AppendToStreamOptions {
	return esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(r)}
}

// TestDeletionWithoutStreamPositions: on a server whose stream reads carry
// no commit positions the deletion still happens, without a record, and
// verification names its tombstone.
func TestDeletionWithoutStreamPositions(t *testing.T) {
	ctx := t.Context()
	s := serveMem(t, &memStreams{unplaced: true})
	if _, err := s.Append(ctx, "delivery-a", domain.NoStream(), chainEvent("delivery.received.v1", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "delivery-b", domain.NoStream(), chainEvent("delivery.received.v1", `{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteStream(ctx, "delivery-a", domain.Any()); err != nil {
		t.Fatalf("delete: %v", err)
	}
	r, err := evidence.VerifyStreams(ctx, s, evidence.Options{})
	if err != nil || r.OK() || r.Problems[0].Kind != evidence.EventInserted || r.Problems[0].Stream != "delivery-a" {
		t.Fatalf("verify: %+v, %v", r.Problems, err)
	}
}
