package systemtest

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/internal/diskreserve"
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

// TestDiskReserveLowAtStart: a relay started on a disk with less than twice
// its reserve free (a small VPS under the default 1 GiB) says so once at
// start, with the free space and the reserve as a person reads them and
// the flag that changes it; a refused sign-up tells the caller where the
// operator looks, without the figures.
func TestDiskReserveLowAtStart(t *testing.T) {
	dir := t.TempDir()
	sp, err := diskreserve.Statfs{Dir: dir}.Space()
	if err != nil || sp.Total == 0 {
		t.Fatalf("statfs %s: %+v %v", dir, sp, err)
	}
	// A reserve of 70 % of what is free: below twice it, above it, with
	// room for the disk to change by a fifth while the test runs.
	percent := 70 * float64(sp.Free) / float64(sp.Total)
	if percent > 50 {
		t.Skipf("%.0f %% of the disk is free: the reserve this test needs is past --min-free-disk's 50 %%", percent/0.7)
	}
	r := harness.Start(t, dir, "--min-free-disk", strconv.FormatFloat(percent, 'f', 4, 64)+"%")

	res := r.GraphQL(t, "", `mutation{ signUp(name: "small-disk"){ token } }`, nil)
	if len(res.Errors) != 1 || res.Errors[0].Code() != "INSUFFICIENT_STORAGE" {
		t.Fatalf("signUp: %s, want INSUFFICIENT_STORAGE", res)
	}
	msg := res.Errors[0].Message
	if !strings.Contains(msg, "its log") || !strings.Contains(msg, "--min-free-disk") || regexp.MustCompile(`[0-9]`).MatchString(msg) {
		t.Errorf("signUp's message %q: want it to name the operator's log and --min-free-disk, and no figure", msg)
	}

	line := regexp.MustCompile(`(?m)^.*level=WARN msg="free disk below twice the reserve \(--min-free-disk\).*$`)
	if n := len(line.FindAllString(r.Output(), -1)); n != 1 {
		t.Fatalf("%d log lines about the reserve at start, want 1:\n%s", n, r.Output())
	}
	got := line.FindString(r.Output())
	for _, want := range []string{"refusing sign-ups", "set a smaller --min-free-disk", "free_bytes=", "reserve_bytes="} {
		if !strings.Contains(got, want) {
			t.Errorf("the start line lacks %q:\n%s", want, got)
		}
	}
	if !regexp.MustCompile(`free="[0-9.]+ [KMGTPE]?i?B" reserve="[0-9.]+ [KMGTPE]?i?B"`).MatchString(got) {
		t.Errorf("the start line does not give the free space and the reserve as a person reads them:\n%s", got)
	}
}
