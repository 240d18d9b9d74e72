package jetstream

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/logexport"
)

// tamperable is a log on a JetStream stream that allows single message
// deletes (as someone with the stream's admin rights can make it), the
// raw JetStream API beside the store, and the relay's checkpoint key.
type tamperable struct {
	s      *Store
	js     natsjs.JetStream
	stream natsjs.Stream
	key    ed25519.PrivateKey
	// events by name, as seed wrote them
	ids map[string]string
}

func newTamperable(t *testing.T, srv interface{ URL() string }) *tamperable {
	t.Helper()
	ctx := testContext(t)
	opts := freshOptions()
	opts.setDefaults()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := streamConfig(opts)
	cfg.Replicas, cfg.DenyDelete = 1, false
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &tamperable{s: openStore(t, srv, opts), js: js, stream: stream, key: key, ids: map[string]string{}}
}

func (l *tamperable) event(name, typ, data string) domain.EventData {
	id := uuid.NewString()
	l.ids[name] = id
	return domain.EventData{ID: id, Type: typ, Data: []byte(data),
		Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), CorrelationID: "c-" + name}}
}

// seed writes two deliveries: a in three appends (the second of two
// events), b in two.
func (l *tamperable) seed(t *testing.T) {
	t.Helper()
	mustAppend(t, l.s, "delivery-a", domain.NoStream(), l.event("a0", "delivery.received.v1", `{"body":"aGVsbG8=","size":5}`))
	mustAppend(t, l.s, "delivery-a", domain.Exact(0),
		l.event("a1", "delivery.forwarded.v1", `{"agent":"n1"}`), l.event("a2", "delivery.answered.v1", `{"status":200}`))
	mustAppend(t, l.s, "delivery-b", domain.NoStream(), l.event("b0", "delivery.received.v1", `{"body":"d29ybGQ=","size":5}`))
	mustAppend(t, l.s, "delivery-a", domain.Exact(2), l.event("a3", "delivery.answered.v1", `{"status":200,"body":"b2s="}`))
	mustAppend(t, l.s, "delivery-b", domain.Any(), l.event("b1", "delivery.answered.v1", `{"status":404}`))
}

// checkpoint signs the log's stream heads with key and appends the
// checkpoint, as the relay does.
func (l *tamperable) checkpoint(t *testing.T, key ed25519.PrivateKey) evidence.Checkpoint {
	t.Helper()
	ctx := testContext(t)
	pos, err := l.s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var signer evidence.HeadsSigner
	if err := signer.Advance(ctx, l.s, pos); err != nil {
		t.Fatal(err)
	}
	cp := signer.Sign(key)
	data, err := json.Marshal(domain.LogCheckpointed{Position: cp.Position, TreeSize: cp.TreeSize, Root: cp.Root, Chain: cp.Chain,
		PublicKey: evidence.FormatPublicKey(key.Public().(ed25519.PublicKey)), Signature: cp.Signature})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l.s, domain.CheckpointStream, domain.Any(), l.event(fmt.Sprintf("cp%d", pos), domain.TypeLogCheckpointed, string(data)))
	return cp
}

func (l *tamperable) verify(t *testing.T, kept ...evidence.Checkpoint) evidence.Report {
	t.Helper()
	r, err := evidence.VerifyStreams(testContext(t), l.s, evidence.Options{PublicKey: l.key.Public().(ed25519.PublicKey), Kept: kept})
	if err != nil {
		t.Fatalf("VerifyStreams: %v", err)
	}
	return r
}

// raw is the message that holds the event named name.
func (l *tamperable) raw(t *testing.T, name string) *natsjs.RawStreamMsg {
	t.Helper()
	ctx := testContext(t)
	last, err := l.stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= last.State.LastSeq; seq++ {
		m, err := l.stream.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if bytes.Contains(m.Data, []byte(l.ids[name])) {
			return m
		}
	}
	t.Fatalf("no message holds %s", name)
	return nil
}

func (l *tamperable) deleteMsg(t *testing.T, seq uint64) {
	t.Helper()
	if err := l.stream.DeleteMsg(testContext(t), seq); err != nil {
		t.Fatalf("DeleteMsg(%d): %v", seq, err)
	}
}

// republish writes a stored message again, with its chain headers but none
// of the server's (a new Nats-Msg-Id, no expectations), and data.
func (l *tamperable) republish(t *testing.T, m *natsjs.RawStreamMsg, data []byte) {
	t.Helper()
	msg := &nats.Msg{Subject: m.Subject, Data: data, Header: nats.Header{}}
	for k, vs := range m.Header {
		if !strings.HasPrefix(k, "Nats-") {
			msg.Header[k] = vs
		}
	}
	if _, err := l.js.PublishMsg(testContext(t), msg); err != nil {
		t.Fatalf("republish: %v", err)
	}
}

// edited is data with one occurrence of old (as long as new) replaced.
func edited(t *testing.T, data []byte, old, new string) []byte {
	t.Helper()
	if len(old) != len(new) || !bytes.Contains(data, []byte(old)) {
		t.Fatalf("cannot replace %q with %q", old, new)
	}
	return bytes.Replace(data, []byte(old), []byte(new), 1)
}

// TestTamperedJetStreamLogIsNamed edits a real JetStream log through the
// raw JetStream API, past the relay, and checks that verification names
// each edit at the right event.
//
// With RELAY_NATS_URL set, the edits are made on that server too (another
// server version, e.g. Debian's nats-server started with -js).
func TestTamperedJetStreamLogIsNamed(t *testing.T) {
	servers := []interface{ URL() string }{natstest.Start(t)}
	if url := os.Getenv("RELAY_NATS_URL"); url != "" {
		servers = append(servers, externalServer(url))
	}
	tests := []struct {
		name   string
		kind   string
		event  string // the event named (its ID), or "" to check the stream
		stream string
		tamper func(t *testing.T, l *tamperable) []evidence.Checkpoint // kept checkpoints
	}{
		{"one body byte", evidence.DataChanged, "a3", "delivery-a", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			m := l.raw(t, "a3")
			l.deleteMsg(t, m.Sequence)
			l.republish(t, m, edited(t, m.Data, "b2s=", "b2t="))
			return nil
		}},
		{"one status", evidence.DataChanged, "b1", "delivery-b", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			m := l.raw(t, "b1")
			l.deleteMsg(t, m.Sequence)
			l.republish(t, m, edited(t, m.Data, `"status":404`, `"status":200`))
			return nil
		}},
		{"a deleted event", evidence.EventMissing, "a3", "delivery-a", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			l.deleteMsg(t, l.raw(t, "a1").Sequence) // a1 and a2: the problem is named at the next event there is
			return nil
		}},
		{"two swapped", evidence.EventsReordered, "a3", "delivery-a", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			m1, m2 := l.raw(t, "a1"), l.raw(t, "a3")
			l.deleteMsg(t, m1.Sequence)
			l.deleteMsg(t, m2.Sequence)
			l.republish(t, m2, m2.Data)
			l.republish(t, m1, m1.Data)
			return nil
		}},
		{"one inserted", evidence.EventInserted, "x", "delivery-a", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			body, err := encodeBatch(batch{stream: "delivery-a", revision: 4, events: []domain.EventData{l.event("x", "delivery.answered.v1", `{"status":200}`)}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.js.Publish(testContext(t), l.s.subjectOf("delivery-a"), body); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
		{"tail cut", evidence.Truncated, "", "", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			cp := l.checkpoint(t, l.key)
			mustAppend(t, l.s, "delivery-c", domain.NoStream(), l.event("c0", "delivery.received.v1", `{}`))
			// The last messages go, the checkpoint and what it signed with them.
			for _, name := range []string{"c0", fmt.Sprintf("cp%d", cp.Position), "b1"} {
				l.deleteMsg(t, l.raw(t, name).Sequence)
			}
			if r := l.verify(t); !r.OK() {
				t.Fatalf("a cut log verifies by itself (only a kept checkpoint shows the cut), got %+v", r.Problems)
			}
			return []evidence.Checkpoint{cp}
		}},
		{"a stream's head cut under a checkpoint", evidence.CheckpointDiffer, "", "", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			l.checkpoint(t, l.key)
			l.deleteMsg(t, l.raw(t, "b1").Sequence)
			return nil
		}},
		{"a forged checkpoint", evidence.BadSignature, "", "", func(t *testing.T, l *tamperable) []evidence.Checkpoint {
			_, other, _ := ed25519.GenerateKey(nil)
			l.checkpoint(t, other)
			return nil
		}},
	}
	for _, srv := range servers {
		for _, tt := range tests {
			t.Run(srv.URL()+"/"+tt.name, func(t *testing.T) {
				l := newTamperable(t, srv)
				l.seed(t)
				if r := l.verify(t); !r.OK() || r.Events != 6 {
					t.Fatalf("before the edit: %d events, %d checkpoints, problems %+v", r.Events, r.Checkpoints, r.Problems)
				}
				kept := tt.tamper(t, l)
				r := l.verify(t, kept...)
				if r.OK() {
					t.Fatalf("the edit went unnoticed: %+v", r)
				}
				p := r.Problems[0]
				if p.Kind != tt.kind || tt.event != "" && p.ID != l.ids[tt.event] || tt.stream != "" && p.Stream != tt.stream {
					t.Fatalf("first problem %+v, want %q at %s %s (id %s); all: %+v", p, tt.kind, tt.stream, tt.event, l.ids[tt.event], r.Problems)
				}
			})
		}
	}
}

// TestJetStreamChainSurvivesRetention deletes a stream that a checkpoint
// signed, and the log still verifies, counting what the deletion removed.
func TestJetStreamChainSurvivesRetention(t *testing.T) {
	l := newTamperable(t, natstest.Start(t))
	l.seed(t)
	kept := l.checkpoint(t, l.key)
	if _, err := l.s.DeleteStream(testContext(t), "delivery-a", domain.Any()); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l.s, "delivery-b", domain.Any(), l.event("b2", "delivery.answered.v1", `{"status":201}`))
	l.checkpoint(t, l.key)
	r := l.verify(t, kept)
	if !r.OK() || r.Deletions != 1 || r.Removed != 4 || r.Checkpoints != 2 {
		t.Fatalf("after a deletion: ok=%v deletions %d removed %d checkpoints %d, problems %+v", r.OK(), r.Deletions, r.Removed, r.Checkpoints, r.Problems)
	}
	// The tombstone records the three messages it removed: what lets the
	// first checkpoint, which signed delivery-a's head, still verify.
	tomb, err := l.stream.GetLastMsgForSubject(testContext(t), l.s.subjectOf("delivery-a"))
	if err != nil {
		t.Fatal(err)
	}
	if removed, err := evidence.ParseRemoved(tomb.Header.Get(headerRemoved)); err != nil || len(removed) != 3 {
		t.Fatalf("the tombstone records %d removed messages (%v), want 3", len(removed), err)
	}
}

// TestJetStreamChainAcrossNodes appends to one stream from two stores (two
// relay nodes) at once: the chain stays whole, since each append chains to
// the head its expected sequence names.
func TestJetStreamChainAcrossNodes(t *testing.T) {
	srv := natstest.Start(t)
	l := newTamperable(t, srv)
	other := openStore(t, srv, Options{Stream: l.s.name, Subject: l.s.subject, Attempt: time.Second})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range []*Store{l.s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := s.Append(testContext(t), "inspector-1", domain.Any(), newEvent("x"), newEvent("y")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l.checkpoint(t, l.key)
	if r := l.verify(t); !r.OK() || r.Events != 101 {
		t.Fatalf("%d events, problems %+v", r.Events, r.Problems)
	}
}

// TestTamperedJetStreamExportIsNamed exports the log and verifies the
// file offline, then changes a byte of an event in the file.
func TestTamperedJetStreamExportIsNamed(t *testing.T) {
	l := newTamperable(t, natstest.Start(t))
	l.seed(t)
	if _, err := l.s.DeleteStream(testContext(t), "delivery-b", domain.Any()); err != nil {
		t.Fatal(err)
	}
	l.checkpoint(t, l.key)
	var buf bytes.Buffer
	if err := logexport.Write(testContext(t), l.s, &buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	check := func(data []byte) evidence.Report {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if ok, err := evidence.IsStreamExport(path); !ok || err != nil {
			t.Fatalf("IsStreamExport = %v, %v", ok, err)
		}
		x, err := evidence.OpenStreamExport(path)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		r, err := evidence.VerifyStreams(testContext(t), x, evidence.Options{PublicKey: l.key.Public().(ed25519.PublicKey)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := check(buf.Bytes()); !r.OK() || r.Deletions != 1 || r.Checkpoints != 1 {
		t.Fatalf("the export: %+v", r)
	}
	r := check(edited(t, buf.Bytes(), `"status":200,"body":"b2s="`, `"status":500,"body":"b2s="`))
	if r.OK() || r.Problems[0].Kind != evidence.DataChanged || r.Problems[0].ID != l.ids["a3"] {
		t.Fatalf("a changed status in the export: %+v", r.Problems)
	}
}
