package ingress

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestRecordedBodiesHoldTheBodyBudget: a body sent to an inspector or a
// LOG Endpoint is held in the body budget until its record is committed,
// as a forwarded body is, RecordedBodyWeight bytes of budget a byte kept:
// one client address's bodies still arriving fill its quarter, and its next
// request is refused 503 naming its share, while another network's is
// recorded; a body recorded gives its bytes back. Before, recorded bodies
// took none of it: 256 requests from one address, each with 256 KiB of
// random body to inspectors, held 350 MiB while they waited for the log's
// writer, and two /24s 830 MiB.
func TestRecordedBodiesHoldTheBodyBudget(t *testing.T) {
	const (
		budget     = 8 << 20 // a client's quarter: 2 MiB
		captureCap = 256 << 10
		declared   = captureCap - 1 // all kept: 4 × 256 KiB of the budget
	)
	e := newEnv(t, Config{MaxBody: 1 << 20, CaptureCap: captureCap, ProxyBodyBudget: budget})
	e.addInspector("insp1", time.Hour)
	e.routes.set(Route{ID: "log1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeLog})

	// A whole body recorded holds nothing once answered.
	if status, _ := postSmall(t, e, "127.0.0.3", "insp1"); status != http.StatusNoContent {
		t.Fatalf("a small body to an inspector: %d, want 204", status)
	}
	if n := e.srv.bodies.InUse(); n != 0 {
		t.Fatalf("after a recorded body: %d bytes of the budget held, want 0", n)
	}

	holds := int64(RecordedBodyWeight * captureCap)
	for _, address := range []string{"insp1", "log1"} {
		if held, answer := declareBody(t, e, "127.0.0.2", address, declared, holds); !held {
			t.Fatalf("a body of %d bytes to %s still arriving: answered %q, want it held in the budget (%d bytes)", declared, address, answer, holds)
		}
	}
	if n := e.srv.bodies.InUse(); n != 2*holds {
		t.Fatalf("two recorded bodies arriving hold %d bytes of the budget, want %d", n, 2*holds)
	}

	// 127.0.0.2 holds its quarter: its next body, however small, waits.
	status, body := postSmall(t, e, "127.0.0.2", "insp1")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "full: client share") {
		t.Errorf("127.0.0.2 at its quarter sends 5 bytes: %d %q, want 503 naming the client share", status, body)
	}
	// Another network's body is recorded and answered.
	if status, _ := postSmall(t, e, "127.0.1.2", "log1"); status != http.StatusNoContent {
		t.Errorf("another network's body with 127.0.0.2 at its quarter: %d, want 204", status)
	}
}
