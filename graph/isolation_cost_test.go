package graph_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/relayhq/relay/domain"
)

// streamReads records the streams the commands read, in order, and
// counts the bytes of the events read by stream and by position.
type streamReads struct {
	domain.EventStore
	mu      sync.Mutex
	streams []string
	bytes   atomic.Int64
	// reading, when set, is called in every stream read before it reads;
	// the func it returns once it has read.
	reading atomic.Pointer[func() (read func())]
	// gate, when set, is called with the stream of every stream read
	// before it reads (after reading); the func it returns once it has
	// read.
	gate atomic.Pointer[func(stream string) (read func())]
}

func (s *streamReads) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	s.mu.Lock()
	s.streams = append(s.streams, stream)
	s.mu.Unlock()
	if f := s.reading.Load(); f != nil {
		defer (*f)()()
	}
	if g := s.gate.Load(); g != nil {
		defer (*g)(stream)()
	}
	events, err := s.EventStore.ReadStream(ctx, stream, from, max)
	s.count(events)
	return events, err
}

func (s *streamReads) ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error) {
	events, err := s.EventStore.ReadAll(ctx, after, max)
	s.count(events)
	return events, err
}

func (s *streamReads) count(events []domain.RecordedEvent) {
	for _, e := range events {
		s.bytes.Add(int64(len(e.Data)))
	}
}

// bytesDuring is the bytes of the events read while f ran.
func (s *streamReads) bytesDuring(f func()) int64 {
	from := s.bytes.Load()
	f()
	return s.bytes.Load() - from
}

// during returns the streams read while f ran.
func (s *streamReads) during(f func()) []string {
	s.mu.Lock()
	from := len(s.streams)
	s.mu.Unlock()
	f()
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.streams[from:])
}

// TestForeignIDsCostLikeUnknownOnes: refusing another team's member or
// token id does the same work as refusing an id nobody has: the same
// streams read, in the same order, none of them the other team's. So
// neither the answer nor its time can tell that the id exists elsewhere.
// (removeMember is refused by a views lookup keyed by the caller's own
// account and the id, before any stream is read.)
func TestForeignIDsCostLikeUnknownOnes(t *testing.T) {
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	ann, amy, cat := newBrowser(t, srv), newBrowser(t, srv), newBrowser(t, srv)
	acme := ann.signUp("Acme", "ann@acme.test")
	if a := amy.join(ann.invite(), "amy@acme.test"); len(a.Errors) > 0 {
		t.Fatalf("join: %+v", a.Errors)
	}
	var members struct {
		Me struct{ Members []struct{ ID, Login string } }
	}
	ann.must(`{ me { members { id login } } }`, nil, &members)
	var amyID string
	for _, m := range members.Me.Members {
		if m.Login == "amy@acme.test" {
			amyID = m.ID
		}
	}
	var tok struct {
		CreateToken struct{ Token struct{ ID string } }
	}
	amy.must(`mutation { createToken(name: "amy's laptop") { token { id } } }`, nil, &tok)
	cat.signUp("Other", "cat@other.test")
	const unknown = "01a22025-0000-7000-8000-000000000000"

	for _, op := range []struct{ name, query, foreign string }{
		{"removeMember", `mutation($id: ID!) { removeMember(id: $id) }`, amyID},
		{"changeMemberRole", `mutation($id: ID!) { changeMemberRole(id: $id, role: OWNER) { id } }`, amyID},
		{"revokeToken", `mutation($id: ID!) { revokeToken(id: $id) }`, tok.CreateToken.Token.ID},
	} {
		t.Run(op.name, func(t *testing.T) {
			var foreign, none gqlAnswer
			foreignReads := e.reads.during(func() { foreign = cat.do(op.query, map[string]any{"id": op.foreign}, nil) })
			unknownReads := e.reads.during(func() { none = cat.do(op.query, map[string]any{"id": unknown}, nil) })
			if foreign.code() != "NOT_FOUND" || none.code() != "NOT_FOUND" {
				t.Fatalf("refusals %q and %q, want NOT_FOUND", foreign.code(), none.code())
			}
			if !slices.Equal(foreignReads, unknownReads) {
				t.Errorf("another team's id read %q, an unknown id %q: want the same work", foreignReads, unknownReads)
			}
			for _, s := range foreignReads {
				if strings.Contains(s, acme.Account.ID) || strings.Contains(s, op.foreign) {
					t.Errorf("refusing another team's id read its stream %q", s)
				}
			}
		})
	}
}
