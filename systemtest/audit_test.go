package systemtest

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestAuditorCommands exports and verifies the log and rebuilds the views
// from it: the rebuilt history must equal the one served before.
func TestAuditorCommands(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	for _, p := range []string{"/a", "/b?x=1", "//c"} {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: p, Host: r.AddressHost(id), Body: []byte(`{"p":"` + p + `"}`)})
	}
	var before []delivery
	harness.Eventually(t, 10*time.Second, "three rows", func() bool {
		before = history(t, r, id, 10)
		return len(before) == 3
	})
	r.Stop(t)

	out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data)
	// 1 inspector.created + 3 delivery.received, each carrying its 204, and
	// the checkpoint the relay signs as it stops
	if code != 0 || !strings.Contains(out, "ok: 5 events chained") || !strings.Contains(out, "1 checkpoint") {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	out, code = harness.RunCLI(t, "events", "export", "--data", r.Data)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	var last uint64
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Position uint64
			Type     string
			Data     json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		if e.Position <= last || e.Type == "" || len(e.Data) == 0 {
			t.Fatalf("export line out of order or empty: %s", sc.Text())
		}
		last = e.Position
		lines++
	}
	if lines != 5 {
		t.Fatalf("export wrote %d events, want 5", lines)
	}
	out, code = harness.RunCLI(t, "events", "rebuild", "--data", r.Data)
	if code != 0 || !strings.Contains(out, "rebuilt views from 5 events") {
		t.Fatalf("rebuild: exit %d\n%s", code, out)
	}

	r.Restart(t)
	after := history(t, r, id, 10)
	b1, _ := json.Marshal(before)
	b2, _ := json.Marshal(after)
	if string(b1) != string(b2) {
		t.Fatalf("history changed by the rebuild:\nbefore %s\nafter  %s", b1, b2)
	}
}
