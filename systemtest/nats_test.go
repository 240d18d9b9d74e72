package systemtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestNATSEventStore runs the relay on a JetStream log held by a NATS
// server in the test process (or the one RELAY_NATS_URL names): an inspector delivery recorded there reads
// back after the relay restarts, and from a second relay whose data folder
// is empty, which can only rebuild its views from the NATS log.
func TestNATSEventStore(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RELAY_NATS_URL") // another server version; it must hold no RELAY_EVENTS stream yet
	if url == "" {
		url = natstest.Start(t).URL()
	}
	r := harness.Start(t, "", "--eventstore", url)
	id, _ := createInspector(t, r)
	// Larger than the capture cap, so the stored event is the largest one a
	// delivery makes: it must fit one JetStream message.
	body := randomBytes(300 << 10)
	req := harness.RawRequest{Host: r.AddressHost(id), Method: "POST", Target: "/hook", Body: body}
	if resp := r.SendRaw(t, req); resp.Status != 204 {
		t.Fatalf("inspector answered %d, want 204", resp.Status)
	}

	// The views follow the log asynchronously; a restarted relay waits for
	// them to catch up before it serves.
	harness.Eventually(t, 15*time.Second, "the delivery in the inspector's history", func() bool { return len(history(t, r, id, 10)) == 1 })
	check := func(t *testing.T, r *harness.Relay) {
		t.Helper()
		got := history(t, r, id, 10)
		if len(got) != 1 {
			t.Fatalf("history has %d rows, want 1", len(got))
		}
		d := got[0]
		stored, err := base64.StdEncoding.DecodeString(d.BodyBase64)
		if err != nil {
			t.Fatal(err)
		}
		if d.Method != "POST" || d.Path != "/hook" || d.BodySize != len(body) || !bytes.Equal(stored, body[:256<<10]) || d.Complete {
			t.Fatalf("delivery %s %s, %d bytes of %d stored, complete=%v", d.Method, d.Path, len(stored), d.BodySize, d.Complete)
		}
	}
	check(t, r)

	r.Stop(t)
	r.Restart(t)
	check(t, r)

	r.Stop(t)
	fresh := harness.Start(t, "", "--eventstore", url)
	check(t, fresh)
}

// TestRetentionOnNATS runs the retention sweep on a JetStream log: an
// expired inspector's delivery streams are deleted there, so its deliveries
// leave the API and the log, which keeps one tombstone per stream and
// verifies.
func TestRetentionOnNATS(t *testing.T) {
	t.Parallel()
	url := natstest.Start(t).URL()
	r := harness.Start(t, "", "--eventstore", url, "--inspector-ttl", "1s", "--inspector-retention", "1s")
	id, _ := createInspector(t, r)
	for _, p := range []string{"/a", "/b"} {
		if resp := send(t, r, id, "POST", p, nil, []byte(`{"secret":"`+p+`"}`)); resp.Status != 204 {
			t.Fatalf("POST %s: %d", p, resp.Status)
		}
	}
	harness.Eventually(t, 20*time.Second, "the inspector purged and its deliveries gone", func() bool {
		got := inspectorNow(t, r, id)
		return got.Purged && len(got.Deliveries.Nodes) == 0
	})
	r.Stop(t)

	var tombstones int
	for _, e := range exportLogFrom(t, "--eventstore", url) {
		switch {
		case e.Type == "delivery.received.v1" && strings.Contains(string(e.Data), `"address":"`+id+`"`):
			t.Errorf("the purged inspector's delivery is still in the log: %s", e.Data)
		case e.Type == "$stream.deleted.v1":
			var tomb struct{ Stream string }
			if err := json.Unmarshal(e.Data, &tomb); err != nil || tomb.Stream != e.Stream || !strings.HasPrefix(tomb.Stream, "delivery-") {
				t.Errorf("tombstone %s of %s", e.Data, e.Stream)
			}
			tombstones++
		}
	}
	if tombstones != 2 {
		t.Fatalf("log holds %d tombstones, want 2", tombstones)
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--eventstore", url); code != 0 || !strings.Contains(out, "(2 deleted)") {
		t.Fatalf("verify after a purge: exit %d\n%s", code, out)
	}
}
