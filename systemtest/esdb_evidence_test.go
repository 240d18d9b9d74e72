package systemtest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/esdb"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/esdbtest"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestEventStoreDBLogByTheCLI writes a chained log through the EventStoreDB
// adapter to an in-memory stand-in for the server's streams service
// (internal/esdbtest: not EventStoreDB, which no test here runs), signs its
// stream heads as a relay does, and runs the relay binary on it: verify
// --eventstore esdb://… and an export verify, prove writes a stream proof
// that verify --proof accepts with the key alone, and an event appended
// past the adapter is named.
func TestEventStoreDBLogByTheCLI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := esdbtest.Start(t, esdbtest.Options{}).URL()
	s, err := esdb.Open(ctx, url, esdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubkey := evidence.FormatPublicKey(key.Public().(ed25519.PublicKey))
	codec := domain.NewCodec()
	at := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	appendEvent := func(stream string, expected domain.ExpectedRevision, e domain.Event) {
		t.Helper()
		data, err := codec.Encode(uuid.NewString(), e, at, domain.Trace{CorrelationID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, stream, expected, data); err != nil {
			t.Fatalf("append to %s: %v", stream, err)
		}
	}
	ids := []string{uuid.NewString(), uuid.NewString()}
	for _, id := range ids {
		appendEvent(domain.DeliveryStream(id), domain.NoStream(), domain.DeliveryReceived{DeliveryID: id, Address: "a1", Method: "POST",
			Target: "/hook", Host: "a1.example", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Body: []byte(`{"p":1}`), BodySize: 7})
	}
	pos, err := s.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var signer evidence.HeadsSigner
	if err := signer.Advance(ctx, s, pos); err != nil {
		t.Fatal(err)
	}
	c := signer.Sign(key)
	appendEvent(domain.CheckpointStream, domain.Any(), domain.LogCheckpointed{Position: c.Position, TreeSize: c.TreeSize, Root: c.Root,
		Chain: c.Chain, PublicKey: pubkey, Signature: c.Signature})

	out, code := harness.RunCLI(t, "events", "verify", "--eventstore", url, "--data", t.TempDir(), "--pubkey", pubkey)
	if code != 0 || !strings.Contains(out, "each stream to its head") || !strings.Contains(out, "1 checkpoint") {
		t.Fatalf("verify --eventstore esdb: exit %d\n%s", code, out)
	}
	export, code := harness.RunCLI(t, "events", "export", "--eventstore", url, "--data", t.TempDir())
	if code != 0 || !strings.Contains(export, `"chain":"stream"`) {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := harness.RunCLI(t, "events", "verify", file, "--pubkey", pubkey); code != 0 || !strings.Contains(out, "each stream to its head") {
		t.Fatalf("verify the export: exit %d\n%s", code, out)
	}
	proof, code := harness.RunCLI(t, "events", "prove", ids[0], "--eventstore", url, "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("prove: exit %d\n%s", code, proof)
	}
	var p evidence.StreamProof
	if err := json.Unmarshal([]byte(proof), &p); err != nil || p.Format != evidence.StreamProofFormat || len(p.Events) != 1 || p.Checkpoint.TreeSize != 2 {
		t.Fatalf("prove wrote %v:\n%s", err, proof)
	}
	good := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(good, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--proof", good, "--pubkey", pubkey); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify --proof: exit %d\n%s", code, out)
	}

	// A delivery appended after the checkpoint waits for the next one.
	late := uuid.NewString()
	appendEvent(domain.DeliveryStream(late), domain.NoStream(), domain.DeliveryReceived{DeliveryID: late, Address: "a1", Method: "POST",
		Target: "/late", Host: "a1.example", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Body: []byte(`{}`), BodySize: 2})
	if out, code := harness.RunCLI(t, "events", "prove", late, "--eventstore", url, "--data", t.TempDir()); code != 1 || !strings.Contains(out, "wait") {
		t.Fatalf("prove a delivery newer than the checkpoint: exit %d\n%s", code, out)
	}

	// An event appended with the server's client, past the adapter: it
	// carries no chain.
	cfg, err := client.ParseConnectionString(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(client.LogLevel, string, ...any) {}
	raw, err := client.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	data, err := codec.Encode(uuid.NewString(), domain.DeliveryAnswered{DeliveryID: ids[1], Status: 200}, at, domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.AppendToStream(ctx, domain.DeliveryStream(ids[1]), client.AppendToStreamOptions{ExpectedRevision: client.Revision(0)},
		client.EventData{EventID: uuid.MustParse(data.ID), EventType: data.Type, ContentType: client.ContentTypeJson, Data: data.Data,
			Metadata: []byte(`{"schema_version":1,"occurred_at":"2026-11-28T04:00:00Z"}`)}); err != nil {
		t.Fatal(err)
	}
	out, code = harness.RunCLI(t, "events", "verify", "--eventstore", url, "--data", t.TempDir(), "--pubkey", pubkey)
	if code != 1 || !strings.Contains(out, "stream delivery-"+ids[1]) || !strings.Contains(out, "event inserted") {
		t.Fatalf("verify after an append past the adapter: exit %d, want 1 naming it\n%s", code, out)
	}
}
