// Package esdbtest runs a small in-memory stand-in for EventStoreDB's gRPC
// streams service on 127.0.0.1, so the EventStoreDB adapter and the system
// tests can run its code through the real client without a server. It
// implements what the adapter uses (appends, stream and $all reads both
// ways, tombstones), not subscriptions, and is not EventStoreDB: it checks
// the adapter against this package's reading of the server's contract.
// Only tests import it.
package esdbtest

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// tombstoneType is the type of the event the server writes at the end of a
// tombstoned stream.
const tombstoneType = "$streamDeleted"

// noPosition is the commit position a server that does not know it on a
// stream read reports.
const noPosition = ^uint64(0)

// Options tune Start.
type Options struct {
	// Unplaced: stream reads report no commit positions, as some servers
	// do.
	Unplaced bool
}

// Server is a running stand-in.
type Server struct{ addr string }

// URL is the connection string of the stand-in.
func (s *Server) URL() string { return "esdb://" + s.addr + "?tls=false" }

// Start runs a stand-in for the rest of the test.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	api.RegisterStreamsServer(srv, &streams{unplaced: opts.Unplaced})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return &Server{addr: ln.Addr().String()}
}

// streams is a small stand-in for EventStoreDB's streams service, as the
// relay's adapter uses it: appends with an expected revision (refused as a
// wrong expected version, or recognised as a retry at the same place),
// forward and backward reads of a stream and of $all, and tombstones. It
// keeps what it stores in memory. It is what the adapter's reads and
// writes are run against in tests, through the real client; it is not the
// server, whose behaviour only the adapter's TestConformance and
// TestChainOnAServer check (with RELAY_EVENTSTORE_URL).
type streams struct {
	api.UnimplementedStreamsServer
	mu      sync.Mutex
	all     []*api.ReadResp_ReadEvent_RecordedEvent
	deleted map[string]bool
	commit  uint64
	// unplaced: stream reads report no commit positions, as some servers
	// do.
	unplaced bool
}

func (m *streams) stream(name string) []*api.ReadResp_ReadEvent_RecordedEvent {
	var out []*api.ReadResp_ReadEvent_RecordedEvent
	for _, r := range m.all {
		if string(r.StreamIdentifier.StreamName) == name && r.Metadata["type"] != tombstoneType {
			out = append(out, r)
		}
	}
	return out
}

func sameID(a, b *shared.UUID) bool {
	return a.GetStructured().GetMostSignificantBits() == b.GetStructured().GetMostSignificantBits() &&
		a.GetStructured().GetLeastSignificantBits() == b.GetStructured().GetLeastSignificantBits()
}

func (m *streams) store(name string, first uint64, typ string, msgs []*api.AppendReq_ProposedMessage) uint64 {
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
func (m *streams) expect(events []*api.ReadResp_ReadEvent_RecordedEvent, want any, first *api.AppendReq_ProposedMessage) (ok, retry bool) {
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

func (m *streams) Append(s api.Streams_AppendServer) error {
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

func (m *streams) Tombstone(_ context.Context, req *api.TombstoneReq) (*api.TombstoneResp, error) {
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
	commit := m.store(name, math.MaxInt64, tombstoneType, []*api.AppendReq_ProposedMessage{{Id: id, Metadata: map[string]string{}}})
	return &api.TombstoneResp{PositionOption: &api.TombstoneResp_Position_{Position: &api.TombstoneResp_Position{CommitPosition: commit, PreparePosition: commit}}}, nil
}

func (m *streams) Read(req *api.ReadReq, s api.Streams_ReadServer) error {
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
				c.CommitPosition, c.PreparePosition = noPosition, noPosition
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
