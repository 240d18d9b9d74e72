package esdb

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/evidence"
)

var chainAt = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// TestChainMetadataGolden checks the user metadata a chained event carries
// byte for byte, and that splitting it gives back the metadata the leaf
// hashed, the leaf and the link.
func TestChainMetadataGolden(t *testing.T) {
	md, err := envelope.EncodeMetadata(domain.Metadata{SchemaVersion: 1, OccurredAt: chainAt, CorrelationID: "d1", CausationID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, link := evidence.Hash{0xab, 1}, evidence.Hash{0xcd, 2}
	var got bytes.Buffer
	for _, m := range [][]byte{md, []byte("{}")} {
		stored := withChain(m, leaf, link)
		fmt.Fprintf(&got, "%s\n", stored)
		back, l1, l2, ok := splitChain(stored)
		if !ok || !bytes.Equal(back, m) || l1 != leaf || l2 != link {
			t.Errorf("splitChain(%s) = %s %v %v %v, want %s back", stored, back, l1, l2, ok, m)
		}
	}
	golden := filepath.Join("testdata", "chain-metadata.golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./eventstore/esdb -run Golden -update creates it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("chained metadata differs from %s:\ngot:\n%s\nwant:\n%s", golden, got.Bytes(), want)
	}
	// What decodes the metadata for the port ignores the chain.
	dm, err := envelope.DecodeMetadata(withChain(md, leaf, link))
	if err != nil || dm.CorrelationID != "d1" || !dm.OccurredAt.Equal(chainAt) {
		t.Fatalf("DecodeMetadata of chained metadata: %+v, %v", dm, err)
	}
}

// TestSplitChainOfOtherMetadata: metadata without a chain, or with one
// that does not parse, comes back whole and unchained.
func TestSplitChainOfOtherMetadata(t *testing.T) {
	good := string(withChain([]byte(`{"a":1}`), evidence.Hash{1}, evidence.Hash{2}))
	for _, s := range []string{
		``, `{}`, `{"schema_version":1}`,
		good[:len(good)-1], // cut
		good[:len(good)-30] + "x" + good[len(good)-29:], // not hex in the link
		`{"a":1` + good[len(`{"a":1`)+1:],               // no comma before the chain
	} {
		md, _, _, ok := splitChain([]byte(s))
		if ok || string(md) != s {
			t.Errorf("splitChain(%q) = %q, ok %v: want it whole, unchained", s, md, ok)
		}
	}
}

func FuzzSplitChain(f *testing.F) {
	f.Add([]byte(`{"a":1}`))
	f.Add(withChain([]byte(`{"a":1}`), evidence.Hash{1}, evidence.Hash{2}))
	f.Add(withChain([]byte(`{}`), evidence.Hash{3}, evidence.Hash{4}))
	f.Fuzz(func(t *testing.T, b []byte) {
		md, leaf, link, ok := splitChain(b)
		if !ok {
			if !bytes.Equal(md, b) {
				t.Fatal("unchained metadata not returned whole")
			}
			return
		}
		if again := withChain(md, leaf, link); !bytes.Equal(again, b) {
			t.Fatalf("withChain(splitChain(%q)) = %q", b, again)
		}
	})
}

// TestPlanAppend: every append but a NoStream one expects an exact
// revision and chains to that revision's link.
func TestPlanAppend(t *testing.T) {
	head := &lastEvent{revision: 4, id: "e4", link: evidence.Hash{4}}
	rev := func(r uint64) *uint64 { return &r }
	for _, tt := range []struct {
		name     string
		expected domain.ExpectedRevision
		last     *lastEvent
		ids      []string
		want     appendPlan
	}{
		{"no stream", domain.NoStream(), nil, []string{"a"}, appendPlan{expected: esdb.NoStream{}}},
		{"exact", domain.Exact(4), nil, []string{"a"}, appendPlan{expected: esdb.Revision(4), first: 5, linkAt: rev(4)}},
		{"any on a new stream", domain.Any(), nil, []string{"a"}, appendPlan{expected: esdb.NoStream{}}},
		{"any after the head", domain.Any(), head, []string{"a", "b"}, appendPlan{expected: esdb.Revision(4), first: 5, prev: evidence.Hash{4}}},
		{"stream exists after the head", domain.StreamExists(), head, []string{"a"}, appendPlan{expected: esdb.Revision(4), first: 5, prev: evidence.Hash{4}}},
		{"stream exists on a new stream", domain.StreamExists(), nil, []string{"a"}, appendPlan{expected: esdb.StreamExists{}}},
		{"any again after it succeeded", domain.Any(), head, []string{"e3", "e4"}, appendPlan{expected: esdb.Revision(2), first: 3, linkAt: rev(2)}},
		{"any again, the stream's only append", domain.Any(), head, []string{"e0", "e1", "e2", "e3", "e4"}, appendPlan{expected: esdb.NoStream{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := planAppend(tt.expected, tt.last, tt.ids)
			if fmt.Sprint(got.expected) != fmt.Sprint(tt.want.expected) || got.first != tt.want.first || got.prev != tt.want.prev ||
				(got.linkAt == nil) != (tt.want.linkAt == nil) || got.linkAt != nil && *got.linkAt != *tt.want.linkAt {
				t.Fatalf("planAppend = %+v, want %+v", got, tt.want)
			}
		})
	}
	if !retried(domain.Any()) || !retried(domain.StreamExists()) || retried(domain.Exact(3)) || retried(domain.NoStream()) {
		t.Fatal("only the adapter's own exact revisions are tried again")
	}
}

// memServer keeps what the adapter writes to EventStoreDB, as the server
// would store it, and reads it back as Messages does: the adapter's
// planning, encoding and decoding, without the client.
type memServer struct {
	all    []*esdb.RecordedEvent
	commit uint64
}

func (m *memServer) stream(name string) []*esdb.RecordedEvent {
	var out []*esdb.RecordedEvent
	for _, r := range m.all {
		if r.StreamID == name && r.EventType != serverTombstone {
			out = append(out, r)
		}
	}
	return out
}

func (m *memServer) newest(name string) *esdb.RecordedEvent {
	s := m.stream(name)
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

// store appends records as one append, as the server does.
func (m *memServer) store(stream string, first uint64, proposed []esdb.EventData) {
	m.commit += 1000
	for i, p := range proposed {
		m.all = append(m.all, &esdb.RecordedEvent{EventID: p.EventID, EventType: p.EventType, StreamID: stream,
			EventNumber: first + uint64(i), Position: esdb.Position{Commit: m.commit, Prepare: m.commit + uint64(i)}, Data: p.Data, UserMetadata: p.Metadata})
	}
}

var errConflict = errors.New("wrong expected version")

// append is Store.Append's chained path: plan, link, encode, and the
// server's check of the exact expectation (with its idempotence).
func (m *memServer) append(t *testing.T, stream string, expected domain.ExpectedRevision, events ...domain.EventData) error {
	t.Helper()
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = uuid.MustParse(e.ID).String()
	}
	var last *lastEvent
	if r := m.newest(stream); r != nil {
		_, _, link, _ := splitChain(r.UserMetadata)
		last = &lastEvent{revision: r.EventNumber, id: r.EventID.String(), link: link}
	}
	p := planAppend(expected, last, ids)
	s := m.stream(stream)
	if p.linkAt != nil && *p.linkAt < uint64(len(s)) {
		_, _, p.prev, _ = splitChain(s[*p.linkAt].UserMetadata)
	}
	proposed, err := toProposedChained(stream, p.first, p.prev, events)
	if err != nil {
		t.Fatal(err)
	}
	switch e := p.expected.(type) {
	case esdb.NoStream:
		if len(s) > 0 {
			if s[0].EventID.String() == ids[0] {
				return nil // the server's idempotence
			}
			return errConflict
		}
	case esdb.StreamRevision:
		if uint64(len(s)) > e.Value+1 && s[e.Value+1].EventID.String() == ids[0] {
			return nil
		}
		if uint64(len(s)) != e.Value+1 {
			return errConflict
		}
	default:
		return errConflict
	}
	m.store(stream, p.first, proposed)
	return nil
}

// placedStream is the stream's events at their port positions.
func (m *memServer) placedStream(name string) []placed {
	var place positioner
	var out []placed
	for _, r := range m.stream(name) {
		pos, _ := place.place(r.Position.Commit)
		out = append(out, placed{rec: r, pos: pos})
	}
	return out
}

// delete is Store.DeleteStream: the record, then the server's tombstone;
// scavenged, the stream's events are gone from $all too.
func (m *memServer) delete(t *testing.T, stream string, scavenged bool) {
	t.Helper()
	rec, err := removalOf(stream, m.placedStream(stream), chainAt)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := rec.proposed()
	if err != nil {
		t.Fatal(err)
	}
	m.store(removedStream(stream), uint64(len(m.stream(removedStream(stream)))), []esdb.EventData{ev})
	if scavenged {
		kept := m.all[:0]
		for _, r := range m.all {
			if r.StreamID != stream {
				kept = append(kept, r)
			}
		}
		m.all = kept
	}
	m.store(stream, math.MaxInt64, []esdb.EventData{{EventID: uuid.New(), EventType: serverTombstone}})
}

// Messages is Store.Messages over what the server holds.
func (m *memServer) Messages(_ context.Context, after uint64, limit int) ([]evidence.Message, error) {
	var place positioner
	var out []evidence.Message
	for _, r := range m.all {
		if isSystem(r) {
			continue
		}
		pos, err := place.place(r.Position.Commit)
		if err != nil {
			return nil, err
		}
		if pos <= after || len(out) == limit {
			continue
		}
		var rec *removalRecord
		if r.EventType == serverTombstone {
			if d := m.newest(removedStream(r.StreamID)); d != nil {
				if rec, err = parseRecord(d.Data); err != nil {
					return nil, err
				}
			}
		}
		msg, err := messageOf(r, pos, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, msg)
	}
	return out, nil
}

func chainEvent(typ, data string) domain.EventData {
	return domain.EventData{ID: uuid.NewString(), Type: typ, Data: []byte(data),
		Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: chainAt, CorrelationID: "c"}}
}

// seedChain writes deliveries as the relay does: Any, exact and
// multi-event appends, a retried append, and checkpoints.
func seedChain(t *testing.T, key ed25519.PrivateKey) (*memServer, evidence.Checkpoint) {
	t.Helper()
	m := &memServer{}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.append(t, "delivery-a", domain.NoStream(), chainEvent("delivery.received.v1", `{"body":"aGk="}`)))
	twice := []domain.EventData{chainEvent("forward.requested.v1", `{"n":1}`), chainEvent("forward.responded.v1", `{"status":200}`)}
	must(m.append(t, "delivery-a", domain.Exact(0), twice...))
	must(m.append(t, "delivery-b", domain.Any(), chainEvent("delivery.received.v1", `{"body":"eW8="}`)))
	must(m.append(t, "delivery-a", domain.Any(), twice...)) // a retry: written once
	if n := len(m.stream("delivery-a")); n != 3 {
		t.Fatalf("delivery-a holds %d events after a retried append, want 3", n)
	}
	must(m.append(t, "delivery-b", domain.Any(), chainEvent("forward.requested.v1", `{"n":2}`)))
	if err := m.append(t, "delivery-b", domain.Exact(0), chainEvent("forward.requested.v1", `{"n":3}`)); !errors.Is(err, errConflict) {
		t.Fatalf("an append behind the head: %v, want a conflict", err)
	}
	return m, m.checkpoint(t, key)
}

// checkpoint signs the heads as the relay does and appends it.
func (m *memServer) checkpoint(t *testing.T, key ed25519.PrivateKey) evidence.Checkpoint {
	t.Helper()
	last, _ := m.Messages(context.Background(), 0, math.MaxInt32)
	var signer evidence.HeadsSigner
	if err := signer.Advance(context.Background(), m, last[len(last)-1].Events[0].Position); err != nil {
		t.Fatal(err)
	}
	c := signer.Sign(key)
	if err := m.append(t, domain.CheckpointStream, domain.Any(), checkpointEvent(t, c, key)); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkpointEvent is c's LogCheckpointed event, as the relay appends it.
func checkpointEvent(t *testing.T, c evidence.Checkpoint, key ed25519.PrivateKey) domain.EventData {
	t.Helper()
	data, err := json.Marshal(domain.LogCheckpointed{Position: c.Position, TreeSize: c.TreeSize, Root: c.Root, Chain: c.Chain,
		PublicKey: evidence.FormatPublicKey(key.Public().(ed25519.PublicKey)), Signature: c.Signature})
	if err != nil {
		t.Fatal(err)
	}
	return chainEvent(domain.TypeLogCheckpointed, string(data))
}

// TestChainVerifiesOverWhatTheAdapterWrites verifies a log as the adapter
// writes it to EventStoreDB, before and after a stream deletion (with and
// without the server's scavenge), with a checkpoint kept from before it,
// proves a delivery, and makes edits past the adapter: each is named.
func TestChainVerifiesOverWhatTheAdapterWrites(t *testing.T) {
	ctx := context.Background()
	pub, key, _ := ed25519.GenerateKey(nil)
	opts := func(kept ...evidence.Checkpoint) evidence.Options {
		return evidence.Options{PublicKey: pub, Kept: kept}
	}
	for _, scavenged := range []bool{false, true} {
		t.Run(fmt.Sprintf("scavenged=%v", scavenged), func(t *testing.T) {
			m, kept := seedChain(t, key)
			r, err := evidence.VerifyStreams(ctx, m, opts(kept))
			if err != nil || !r.OK() || r.Events != 6 || r.Checkpoints != 1 {
				t.Fatalf("before a deletion: %+v, %v", r, err)
			}
			m.delete(t, "delivery-a", scavenged)
			if err := m.append(t, "delivery-b", domain.Any(), chainEvent("forward.responded.v1", `{"status":201}`)); err != nil {
				t.Fatal(err)
			}
			m.checkpoint(t, key)
			r, err = evidence.VerifyStreams(ctx, m, opts(kept))
			if err != nil || !r.OK() || r.Deletions != 1 || r.Removed != 3 || r.Checkpoints != 2 {
				t.Fatalf("after a deletion: ok %v deletions %d removed %d checkpoints %d problems %+v, %v", r.OK(), r.Deletions, r.Removed, r.Checkpoints, r.Problems, err)
			}
			c := m.checkpoint(t, key)
			p, err := evidence.ProveStream(ctx, m, "delivery-b", c, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if err := evidence.VerifyStreamProof(p, pub); err != nil || len(p.Events) != 3 {
				t.Fatalf("a proof of delivery-b: %d events, %v", len(p.Events), err)
			}
		})
	}

	edits := []struct {
		name string
		edit func(m *memServer)
		kind string
	}{
		{"a body byte", func(m *memServer) { m.stream("delivery-b")[0].Data[3] ^= 1 }, evidence.DataChanged},
		{"a metadata byte", func(m *memServer) { m.stream("delivery-a")[1].UserMetadata[5] ^= 1 }, evidence.DataChanged},
		{"an event written past the adapter", func(m *memServer) {
			p, _ := toProposed([]domain.EventData{chainEvent("forward.requested.v1", `{}`)})
			m.store("delivery-b", 2, p)
		}, evidence.EventInserted},
		{"an event removed", func(m *memServer) {
			for i, r := range m.all {
				if r.StreamID == "delivery-a" && r.EventNumber == 1 {
					m.all = append(m.all[:i], m.all[i+1:]...)
					return
				}
			}
		}, evidence.EventMissing},
	}
	for _, tt := range edits {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := seedChain(t, key)
			tt.edit(m)
			r, err := evidence.VerifyStreams(ctx, m, opts())
			if err != nil || r.OK() {
				t.Fatalf("verify after %s: %+v, %v", tt.name, r, err)
			}
			found := false
			for _, p := range r.Problems {
				found = found || p.Kind == tt.kind
			}
			if !found {
				t.Fatalf("after %s: %+v, want %q", tt.name, r.Problems, tt.kind)
			}
		})
	}
	t.Run("a deletion's record removed", func(t *testing.T) {
		m, kept := seedChain(t, key)
		m.delete(t, "delivery-a", true)
		kept2 := m.all[:0]
		for _, r := range m.all {
			if r.StreamID != removedStream("delivery-a") {
				kept2 = append(kept2, r)
			}
		}
		m.all = kept2
		r, err := evidence.VerifyStreams(ctx, m, opts(kept))
		if err != nil || r.OK() {
			t.Fatalf("verify without the deletion's record: %+v, %v", r, err)
		}
	})
}

// TestChainOnAServer runs the chain's scenario (checkChain) on a real
// server named by RELAY_EVENTSTORE_URL, in streams of its own. It has not
// run in this repository's tests (no server runs here).
func TestChainOnAServer(t *testing.T) {
	url := os.Getenv("RELAY_EVENTSTORE_URL")
	if url == "" {
		t.Skip("RELAY_EVENTSTORE_URL is not set: set it to an EventStoreDB server (esdb://host:2113?tls=false) to run the chain against it")
	}
	s, err := Open(t.Context(), url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkChain(t, s, "-"+uuid.NewString(), false)
}
