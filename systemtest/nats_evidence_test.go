package systemtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestTamperedJetStreamLogIsNamedByTheCLI runs the relay on a JetStream log,
// verifies it with relay events verify directly on the NATS URL, through
// the running relay's /log/export and on an export file, then changes one
// byte of a delivery's body through the raw JetStream API and checks that
// verify exits 1 and names the event. The log's JetStream stream is created
// beforehand allowing message deletes, as an operator with the stream's
// admin rights can create it (the relay creates it denying them). With
// RELAY_NATS_URL it runs on that server instead.
func TestTamperedJetStreamLogIsNamedByTheCLI(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RELAY_NATS_URL") // another server version; it must hold no RELAY_EVENTS stream yet
	if url == "" {
		url = natstest.Start(t).URL()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "RELAY_EVENTS", Subjects: []string{"relay.events.*"},
		Storage: natsjs.FileStorage, AllowRollup: true, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := harness.Start(t, dir, "--eventstore", url, "--checkpoint-interval", "200ms", "--admin-token", "ops-secret")
	id, _ := createInspector(t, r)
	for _, p := range []string{"/a", "/b"} {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: p, Host: r.AddressHost(id), Body: []byte(`{"p":"` + p + `"}`)})
	}
	pubkey, code := harness.RunCLI(t, "events", "pubkey", "--data", dir)
	if code != 0 {
		t.Fatalf("pubkey: exit %d %s", code, pubkey)
	}
	pubkey = strings.TrimSpace(pubkey)
	var kept string
	harness.Eventually(t, 15*time.Second, "a verified checkpoint over both deliveries, through the running relay", func() bool {
		out, code := harness.RunCLI(t, "events", "verify", "--server", r.BareURL(), "--admin-token", "ops-secret", "--pubkey", pubkey)
		_, kept, _ = strings.Cut(out, "last checkpoint (keep it; verify --checkpoint checks a later log against it): ")
		kept, _, _ = strings.Cut(kept, "\n")
		return code == 0 && strings.Contains(out, "each stream to its head") && strings.Contains(out, "stream-heads-v1") && !strings.Contains(out, "not checked")
	})
	r.Stop(t)

	out, code := harness.RunCLI(t, "events", "verify", "--eventstore", url, "--data", t.TempDir(), "--pubkey", pubkey)
	if code != 0 || !strings.Contains(out, "each stream to its head") {
		t.Fatalf("verify on the NATS URL: exit %d\n%s", code, out)
	}
	export, code := harness.RunCLI(t, "events", "export", "--eventstore", url, "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = harness.RunCLI(t, "events", "verify", file, "--pubkey", pubkey, "--checkpoint", kept)
	if code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify the export offline with the kept checkpoint %s: exit %d\n%s", kept, code, out)
	}
	// The export cut before its second delivery: the last checkpoint (the
	// one the relay wrote as it stopped) shows it.
	_, last, _ := strings.Cut(out, "last checkpoint (keep it; verify --checkpoint checks a later log against it): ")
	last, _, _ = strings.Cut(last, "\n")
	lines := strings.SplitAfter(export, "\n")
	cut := ""
	for _, l := range lines {
		if strings.Contains(l, "eyJwIjoiL2Ii") { // the second delivery's body, {"p":"/b"}
			break
		}
		cut += l
	}
	if err := os.WriteFile(file, []byte(cut), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := harness.RunCLI(t, "events", "verify", file, "--pubkey", pubkey, "--checkpoint", last); code != 1 || !strings.Contains(out, "log truncated after a checkpoint") {
		t.Fatalf("verify a cut export with the kept checkpoint: exit %d, want 1 naming the cut\n%s", code, out)
	}

	// One byte of the first delivery's stored body ({"p":"/a"} in base64:
	// eyJwIjoiL2Ei), rewritten past the relay: the message is deleted and
	// published again with its chain headers.
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var victim *natsjs.RawStreamMsg
	for seq := uint64(1); seq <= info.State.LastSeq && victim == nil; seq++ {
		if m, err := stream.GetMsg(ctx, seq); err == nil && bytes.Contains(m.Data, []byte("eyJwIjoiL2Ei")) {
			victim = m
		}
	}
	if victim == nil {
		t.Fatal("no message holds the first delivery's body")
	}
	if err := stream.DeleteMsg(ctx, victim.Sequence); err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: victim.Subject, Data: bytes.Replace(victim.Data, []byte("eyJwIjoiL2Ei"), []byte("eyJwIjoiL2Ej"), 1), Header: nats.Header{}}
	for k, v := range victim.Header {
		if !strings.HasPrefix(k, "Nats-") {
			msg.Header[k] = v
		}
	}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	out, code = harness.RunCLI(t, "events", "verify", "--eventstore", url, "--data", t.TempDir(), "--pubkey", pubkey)
	if code != 1 || !regexp.MustCompile(`problem: position \d+ stream delivery-\S+ id \S+: data changed`).MatchString(out) {
		t.Fatalf("verify after a body byte changed: exit %d, want 1 naming the event\n%s", code, out)
	}
	t.Logf("verify after a body byte changed:\n%s", out)
}

// TestJetStreamCheckpointsFromTwoNodes runs two relays on one JetStream log
// with the same --checkpoint-key, each taking deliveries and signing the
// stream heads every 200 ms: the log verifies, every node's checkpoints
// with the one key.
func TestJetStreamCheckpointsFromTwoNodes(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).URL()
	key := filepath.Join(t.TempDir(), "checkpoint.key")
	flags := func(node string) []string {
		return []string{"--eventstore", url, "--bus", url, "--node-id", node, "--checkpoint-interval", "200ms", "--checkpoint-key", key}
	}
	a := harness.Start(t, "", flags("a")...) // creates the key
	b := harness.Start(t, "", flags("b")...)
	pubkey, code := harness.RunCLI(t, "events", "pubkey", "--checkpoint-key", key)
	if code != 0 {
		t.Fatalf("pubkey: exit %d %s", code, pubkey)
	}
	pubkey = strings.TrimSpace(pubkey)
	for _, r := range []*harness.Relay{a, b} {
		id, _ := createInspector(t, r)
		for _, p := range []string{"/1", "/2", "/3"} {
			r.SendRaw(t, harness.RawRequest{Host: r.AddressHost(id), Method: "POST", Target: p, Body: []byte(`{}`)})
		}
	}
	var out string
	defer func() {
		if t.Failed() {
			t.Logf("last verification:\n%s", out)
		}
	}()
	harness.Eventually(t, 20*time.Second, "a verified log with checkpoints", func() bool {
		out, code = harness.RunCLI(t, "events", "verify", "--eventstore", url, "--data", t.TempDir(), "--pubkey", pubkey)
		return code == 0 && strings.Contains(out, "each stream to its head") && !(strings.Contains(out, " 0 checkpoints") || strings.Contains(out, "no checkpoint"))
	})
	t.Logf("while both run:\n%s", out)
	a.Stop(t)
	b.Stop(t)
	out, code = harness.RunCLI(t, "events", "verify", "--eventstore", url, "--data", t.TempDir(), "--pubkey", pubkey)
	if code != 0 || strings.Contains(out, "problem") || (strings.Contains(out, " 0 checkpoints") || strings.Contains(out, "no checkpoint")) {
		t.Fatalf("after both nodes stopped: exit %d\n%s", code, out)
	}
	t.Logf("%s", out)
}

// TestJetStreamDeliveryProof runs the relay on a JetStream log and proves
// one delivery with relay events prove --eventstore: refused, naming the
// wait, while no checkpoint signs it; once the relay's shutdown checkpoint
// does, verify --proof accepts the proof with the public key alone, and
// names a body byte changed in it and a forged checkpoint.
func TestJetStreamDeliveryProof(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).URL()
	dir := t.TempDir()
	// No checkpoint while it runs: only the one it signs as it stops.
	r := harness.Start(t, dir, "--eventstore", url, "--checkpoint-interval", "1h")
	id, _ := createInspector(t, r)
	for _, p := range []string{"/a", "/b"} {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: p, Host: r.AddressHost(id), Body: []byte(`{"p":"` + p + `"}`)})
	}
	pubkey, code := harness.RunCLI(t, "events", "pubkey", "--data", dir)
	if code != 0 {
		t.Fatalf("pubkey: exit %d %s", code, pubkey)
	}
	pubkey = strings.TrimSpace(pubkey)
	export, code := harness.RunCLI(t, "events", "export", "--eventstore", url, "--data", t.TempDir())
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	delivery := ""
	for _, line := range strings.Split(export, "\n") {
		var e struct{ Stream, Type string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == "delivery.received.v1" {
			delivery = strings.TrimPrefix(e.Stream, "delivery-")
			break
		}
	}
	if delivery == "" {
		t.Fatalf("no delivery in the export:\n%s", export)
	}
	prove := func() (string, int) {
		return harness.RunCLI(t, "events", "prove", delivery, "--eventstore", url, "--data", t.TempDir())
	}
	if out, code := prove(); code != 1 || !strings.Contains(out, "no checkpoint signs delivery") || !strings.Contains(out, "wait") {
		t.Fatalf("prove before any checkpoint: exit %d, want 1 telling to wait\n%s", code, out)
	}
	r.Stop(t)

	proof, code := prove()
	if code != 0 {
		t.Fatalf("prove: exit %d\n%s", code, proof)
	}
	var p evidence.StreamProof
	if err := json.Unmarshal([]byte(proof), &p); err != nil || p.Format != evidence.StreamProofFormat || len(p.Events) == 0 || p.Events[0].Revision != 0 {
		t.Fatalf("prove wrote %v:\n%s", err, proof)
	}
	good := filepath.Join(t.TempDir(), "delivery.proof.json")
	if err := os.WriteFile(good, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := harness.RunCLI(t, "events", "verify", "--proof", good, "--pubkey", pubkey)
	if code != 0 || !strings.Contains(out, "ok: ") || !strings.Contains(out, "delivery.received.v1") {
		t.Fatalf("verify --proof of an untouched proof: exit %d\n%s", code, out)
	}
	t.Logf("%s", out)

	other, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		edit func(p *evidence.StreamProof)
		want string
	}{
		{"a body byte", func(p *evidence.StreamProof) { p.Events[0].Data = []byte(flipBody(string(p.Events[0].Data))) }, "data changed"},
		{"a checkpoint signed with another key", func(p *evidence.StreamProof) {
			root, _ := evidence.ParseHash(p.Checkpoint.Root)
			p.Checkpoint.Signature = base64.StdEncoding.EncodeToString(evidence.SignHeads(other, p.Checkpoint.Position, p.Checkpoint.TreeSize, root))
		}, "checkpoint signature invalid"},
		{"the head's index", func(p *evidence.StreamProof) { p.HeadIndex = p.Checkpoint.TreeSize + 1 }, "head not in the signed tree"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c evidence.StreamProof
			if err := json.Unmarshal([]byte(proof), &c); err != nil {
				t.Fatal(err)
			}
			tt.edit(&c)
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "proof.json")
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
			out, code := harness.RunCLI(t, "events", "verify", "--proof", f, "--pubkey", pubkey)
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, want 1 naming %q:\n%s", code, tt.want, out)
			}
		})
	}
}
