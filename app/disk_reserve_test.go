package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/internal/testwait"
)

// fakeDisk is the data folder's file system as the test sets it: 100 GiB,
// of which free bytes are free.
type fakeDisk struct{ free atomic.Uint64 }

func (d *fakeDisk) Space() (diskreserve.Space, error) {
	return diskreserve.Space{Free: d.free.Load(), Total: 100 << 30}, nil
}

// TestDiskReserveRefusesGrowthWhileRetentionFrees: with a 1 GiB reserve,
// less than 2 GiB free refuses sign-ups, new inspectors and Endpoints and
// inspectors' deliveries while accounts' deliveries go on; less than 1 GiB
// refuses those too (507, nothing recorded). Quota changes and retention's
// deletions still work then, and once space is back deliveries are
// recorded again.
func TestDiskReserveRefusesGrowthWhileRetentionFrees(t *testing.T) {
	disk := &fakeDisk{}
	disk.free.Store(50 << 30)
	srv, a := diskRelay(t, diskreserve.Limit{Bytes: 1 << 30}, disk)
	var up struct {
		SignUp struct {
			Token   string
			Account struct{ ID string }
		}
	}
	gql(t, srv.URL, "", `mutation{ signUp(name: "disk"){ token account{ id } } }`, nil, &up)
	token, account := up.SignUp.Token, up.SignUp.Account.ID
	var ep struct{ CreateEndpoint struct{ ID string } }
	gql(t, srv.URL, token, `mutation{ createEndpoint(input: {name: "disk", mode: LOG}){ id } }`, nil, &ep)
	endpoint := ep.CreateEndpoint.ID
	var in struct{ CreateInspector struct{ ID string } }
	gql(t, srv.URL, "", `mutation{ createInspector{ id } }`, nil, &in)
	inspector := in.CreateInspector.ID
	for _, id := range []string{endpoint, inspector} {
		if status, body := sendHook(t, srv, id); status != http.StatusNoContent {
			t.Fatalf("with room: %s answered %d %q, want 204", id, status, body)
		}
	}

	// Below twice the reserve: new and anonymous work is refused first.
	setFree(a, disk, 1536<<20)
	for _, m := range []struct{ token, op string }{
		{"", `mutation{ signUp(name: "late"){ token } }`},
		{"", `mutation{ createInspector{ id } }`},
		{token, `mutation{ createEndpoint(input: {name: "more", mode: LOG}){ id } }`},
	} {
		if code := gqlCode(t, srv.URL, m.token, m.op); code != "INSUFFICIENT_STORAGE" {
			t.Errorf("%s below twice the reserve: code %q, want INSUFFICIENT_STORAGE", m.op, code)
		}
	}
	if status, body := sendHook(t, srv, inspector); status != http.StatusInsufficientStorage || !strings.Contains(body, "disk is nearly full") {
		t.Errorf("inspector below twice the reserve: %d %q, want 507 naming the disk", status, body)
	}
	if status, _ := sendHook(t, srv, endpoint); status != http.StatusNoContent {
		t.Errorf("Endpoint below twice the reserve: %d, want 204 (accounts' deliveries go on)", status)
	}
	waitHistory(t, srv, token, endpoint, 2)

	// Below the reserve: deliveries are refused and nothing is recorded.
	setFree(a, disk, 512<<20)
	for range 2 {
		status, body := sendHook(t, srv, endpoint)
		if status != http.StatusInsufficientStorage || !strings.Contains(body, "disk is nearly full") {
			t.Errorf("Endpoint below the reserve: %d %q, want 507 naming the disk", status, body)
		}
	}
	caughtUp(t, a)
	if n := len(history(t, srv, token, endpoint)); n != 2 {
		t.Fatalf("below the reserve the Endpoint holds %d deliveries, want the 2 recorded before", n)
	}
	var ds struct {
		Endpoint struct {
			Deliveries struct{ Nodes []struct{ ID string } }
		}
	}
	gql(t, srv.URL, token, `query($id: ID!){ endpoint(id: $id){ deliveries{ nodes{ id } } } }`, map[string]any{"id": endpoint}, &ds)
	for _, op := range []string{
		fmt.Sprintf(`mutation{ retryDelivery(id: %q){ id } }`, ds.Endpoint.Deliveries.Nodes[0].ID),
		fmt.Sprintf(`mutation{ redriveDead(endpoint: %q) }`, endpoint),
	} {
		if code := gqlCode(t, srv.URL, token, op); code != "INSUFFICIENT_STORAGE" {
			t.Errorf("%s below the reserve: code %q, want INSUFFICIENT_STORAGE", op, code)
		}
	}
	// What frees space or changes limits still works: a quota change, and
	// retention deleting the Endpoint's deliveries past its window.
	storage := "5GiB"
	if err := a.Service().SetAccountQuota(t.Context(), account, &storage, nil, nil); err != nil {
		t.Fatalf("quota change below the reserve: %v", err)
	}
	res, err := a.Service().SweepEndpointRetention(t.Context(), time.Now().Add(2*time.Hour))
	if err != nil {
		t.Fatalf("retention below the reserve: %v", err)
	}
	if res.Deleted != 2 {
		t.Fatalf("retention below the reserve deleted %d delivery streams, want 2 (%+v)", res.Deleted, res)
	}
	waitHistory(t, srv, token, endpoint, 0)

	// Room again: recorded again.
	setFree(a, disk, 50<<30)
	if status, _ := sendHook(t, srv, endpoint); status != http.StatusNoContent {
		t.Fatalf("with room again: %d, want 204", status)
	}
	waitHistory(t, srv, token, endpoint, 1)

	metrics := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`relay_disk_reserve_refusals_total{what="delivery"} 3`,
		`relay_disk_reserve_refusals_total{what="api"} 5`,
		"relay_disk_reserve_level 0",
		"relay_disk_reserve_bytes 1.073741824e+09",
		"relay_disk_free_bytes 5.36870912e+10",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestDiskReserveReadsTheDataFolder: without a Source of its own the relay
// reads the data folder's file system; a reserve no disk can hold refuses
// new inspectors, through the API and smee's /new.
func TestDiskReserveReadsTheDataFolder(t *testing.T) {
	srv, a := diskRelay(t, diskreserve.Limit{Bytes: 1 << 62}, nil)
	s := a.DiskReserve().State()
	if s.Err != nil || s.Free == 0 || s.Level != diskreserve.Full {
		t.Fatalf("state %+v, want the data folder's free bytes, below a 4 EiB reserve", s)
	}
	if code := gqlCode(t, srv.URL, "", `mutation{ createInspector{ id } }`); code != "INSUFFICIENT_STORAGE" {
		t.Errorf("createInspector: code %q, want INSUFFICIENT_STORAGE", code)
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/new", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost"
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage {
		t.Errorf("/new: %d, want 507", resp.StatusCode)
	}
	if m := get(t, srv.URL+"/metrics"); !strings.Contains(m, "relay_disk_reserve_level 2") || strings.Contains(m, "relay_disk_free_bytes -1") {
		t.Errorf("metrics do not show the data folder's disk below the reserve:\n%s", grepLines(m, "relay_disk_"))
	}
}

// diskRelay starts a relay with the reserve limit over disk (nil: statfs
// on its data folder), Endpoints keeping deliveries an hour, and no
// background sweeps (the test runs them).
func diskRelay(t *testing.T, limit diskreserve.Limit, disk diskreserve.Source) (*httptest.Server, *app.App) {
	t.Helper()
	a, err := app.New(t.Context(), app.Config{
		Data: t.TempDir(), NoSweeps: true, MinFreeDisk: limit, DiskSpace: disk,
		Commands: commands.Config{SignupOpen: true, InspectorTTL: 24 * time.Hour,
			Retention: domain.RetentionLimits{Default: time.Hour, Min: time.Hour, Max: time.Hour}},
		PublicURL: func(id string) string { return "http://" + id + ".localhost/" },
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, a
}

// setFree sets the fake disk's free bytes and has the reserve read them
// now (it reads at most once a second on its own).
func setFree(a *app.App, disk *fakeDisk, free uint64) {
	disk.free.Store(free)
	a.DiskReserve().Check()
}

// waitHistory waits until the Endpoint's history holds n deliveries.
func waitHistory(t *testing.T, srv *httptest.Server, token, id string, n int) {
	t.Helper()
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if got := len(history(t, srv, token, id)); got != n {
			return fmt.Errorf("history holds %d deliveries, want %d", got, n)
		}
		return nil
	})
}

// caughtUp waits until the views hold everything the log holds.
func caughtUp(t *testing.T, a *app.App) {
	t.Helper()
	last, err := a.Store().LastPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Views().WaitFor(t.Context(), last); err != nil {
		t.Fatal(err)
	}
}

// gqlCode runs one operation that should be refused and returns its
// first error's extensions.code.
func gqlCode(t *testing.T, base, token, query string) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost"
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Errors []struct {
			Message    string
			Extensions struct{ Code string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) == 0 {
		return ""
	}
	return res.Errors[0].Extensions.Code
}

// get reads a page of the bare domain.
func get(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grepLines keeps the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
