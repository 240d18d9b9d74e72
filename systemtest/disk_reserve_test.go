package systemtest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDiskReserveFlag: `relay serve --min-free-disk` reads the data folder's
// disk (statfs); a reserve no disk holds refuses new inspectors, says so
// in the log once, and shows the level in /metrics.
func TestDiskReserveFlag(t *testing.T) {
	r := harness.Start(t, "", "--min-free-disk", "1PiB")
	if code := r.ErrorCode(t, "", `mutation{ createInspector{ id } }`, nil); code != "INSUFFICIENT_STORAGE" {
		t.Fatalf("createInspector with a 1 PiB reserve: %q, want INSUFFICIENT_STORAGE", code)
	}
	req, _ := http.NewRequest(http.MethodGet, r.BareURL()+"/metrics", nil)
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"relay_disk_reserve_level 2", `relay_disk_reserve_refusals_total{what="api"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), "relay_disk_free_bytes -1") {
		t.Error("/metrics: the free disk was not read")
	}
	if n := strings.Count(r.Output(), "free disk below the reserve"); n != 1 {
		t.Errorf("%d log lines about the reserve, want 1:\n%s", n, r.Output())
	}
}
