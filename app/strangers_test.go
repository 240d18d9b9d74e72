package app_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/logtest"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/ratelimit"
)

// strangersRelay starts a relay whose background work runs (refusal
// counts are appended every 10 ms), with cfg's limits.
func strangersRelay(t *testing.T, tune func(*app.Config)) (*httptest.Server, *app.App) {
	t.Helper()
	cfg := app.Config{
		Data: t.TempDir(), RetentionSweep: time.Hour, InspectorRetention: time.Hour, BodyTimeout: 30 * time.Second,
		Commands:  commands.Config{SignupOpen: true, InspectorTTL: 24 * time.Hour},
		Ingress:   ingress.Config{Domain: "localhost", RefusalInterval: 10 * time.Millisecond},
		PublicURL: func(id string) string { return "http://" + id + ".localhost/" },
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tune != nil {
		tune(&cfg)
	}
	a, err := app.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv, a
}

// post sends body to the public address id and returns the status.
func post(t *testing.T, srv *httptest.Server, id string, body []byte) int {
	t.Helper()
	status, _ := sendBody(t, srv, id, body)
	return status
}

// sendBody sends body to the public address id and returns the status
// and text of the answer.
func sendBody(t *testing.T, srv *httptest.Server, id string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = id + ".localhost"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(text)
}

// metric reads one series of /metrics (0 when it is absent).
func metric(t *testing.T, srv *httptest.Server, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(get(t, srv.URL+"/metrics"))
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRefusalCountsStopAtTheirOwnersStorage: a request refused by its
// address's rate limit is counted, and the counts appended every
// --refusal-interval (address.rate_limited.v1) are kept for good. A
// stranger flooding an inspector, or an Endpoint of a full account, grew
// the log by one event per address an interval for as long as the flood
// lasted, past every quota. An inspector's counts now count in its
// stored bytes, and no count is appended once its owner's storage is used
// up (the inspector's quota, the guests' storage, the account's quota):
// the refusals are counted in the metrics alone.
func TestRefusalCountsStopAtTheirOwnersStorage(t *testing.T) {
	const rounds = 20
	full := bytes.Repeat([]byte("f"), 4<<10) // past every storage below
	oneAtATime := ratelimit.Rate{N: 1, Per: time.Hour, Burst: 1}
	for _, tc := range []struct {
		name string
		tune func(*app.Config)
		// address makes the address (its delivery within the burst fills
		// its storage) and returns it and the token that reads it.
		address func(t *testing.T, srv *httptest.Server) (id, token string)
		kind    string
	}{
		{"inspector at its quota", func(c *app.Config) { c.Ingress.InspectorQuota = 2 << 10 }, guestInspector, "inspector"},
		{"inspector past its network's share of the guests' storage", func(c *app.Config) {
			c.Commands.GuestStorage = domain.GuestStorage{Total: 2 << 10 * domain.GuestNetworkShares}
		}, guestInspector, "inspector"},
		{"Endpoint of an account at its quota", func(c *app.Config) { c.Commands.Quotas.Storage = 2 << 10 }, tenantEndpoint, "endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, a := strangersRelay(t, func(c *app.Config) {
				c.Ingress.AddressRate = oneAtATime
				tc.tune(c)
			})
			id, token := tc.address(t, srv)
			if status := post(t, srv, id, full); status != http.StatusNoContent {
				t.Fatalf("the delivery within the burst: %d, want 204", status)
			}
			caughtUp(t, a)
			from, err := a.Store().LastPosition(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for i := range rounds {
				if status := post(t, srv, id, []byte("{}")); status != http.StatusTooManyRequests {
					t.Fatalf("request %d past the burst: %d, want 429", i, status)
				}
				// Each refusal is either appended (and applied) or counted
				// only in the metrics; the next one comes in a later
				// interval.
				testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
					got := refusedRequests(t, srv, tc.kind, id, token) + int(metric(t, srv, "relay_address_refusals_unrecorded_total"))
					if got < i+1 {
						return fmt.Errorf("%d refusals counted, want %d", got, i+1)
					}
					return nil
				})
			}
			caughtUp(t, a)
			appended := logtest.BytesAfter(t, a.Store(), from)
			t.Logf("%d refused requests in %d intervals appended %d bytes to the log with the address's storage used up", rounds, rounds, appended)
			if appended != 0 {
				t.Errorf("appended %d bytes of refusal counts past the storage that counts them, want none", appended)
			}
			if n := metric(t, srv, "relay_address_refusals_unrecorded_total"); n != rounds {
				t.Errorf("relay_address_refusals_unrecorded_total is %v, want %d", n, rounds)
			}
		})
	}
}

// TestInspectorRefusalCountsAreStored: an inspector's refusal counts are
// kept for good, so they count in its stored bytes (and so its quota and
// the guests' storage), as its own stream's events do.
func TestInspectorRefusalCountsAreStored(t *testing.T) {
	srv, a := strangersRelay(t, func(c *app.Config) { c.Ingress.AddressRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: 1} })
	id, _ := guestInspector(t, srv)
	if status := post(t, srv, id, []byte("{}")); status != http.StatusNoContent {
		t.Fatalf("the delivery within the burst: %d, want 204", status)
	}
	caughtUp(t, a)
	before := inspectorStored(t, srv, id)
	from, err := a.Store().LastPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 3
	for i := range rounds {
		if status := post(t, srv, id, []byte("{}")); status != http.StatusTooManyRequests {
			t.Fatalf("request %d past the burst: %d, want 429", i, status)
		}
		testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
			if got := refusedRequests(t, srv, "inspector", id, ""); got < i+1 {
				return fmt.Errorf("%d refusals counted, want %d", got, i+1)
			}
			return nil
		})
	}
	caughtUp(t, a)
	appended := logtest.BytesAfter(t, a.Store(), from)
	grew := inspectorStored(t, srv, id) - before
	t.Logf("%d refusal counts appended %d bytes; the inspector's storedBytes grew %d", rounds, appended, grew)
	if appended == 0 || grew != appended {
		t.Errorf("the inspector's storedBytes grew %d for %d bytes of its refusal counts, want the same", grew, appended)
	}
}

func guestInspector(t *testing.T, srv *httptest.Server) (string, string) {
	t.Helper()
	var in struct{ CreateInspector struct{ ID string } }
	gql(t, srv.URL, "", `mutation{ createInspector{ id } }`, nil, &in)
	return in.CreateInspector.ID, ""
}

func tenantEndpoint(t *testing.T, srv *httptest.Server) (string, string) {
	t.Helper()
	var up struct{ SignUp struct{ Token string } }
	gql(t, srv.URL, "", `mutation{ signUp(name: "flooded"){ token } }`, nil, &up)
	var ep struct{ CreateEndpoint struct{ ID string } }
	gql(t, srv.URL, up.SignUp.Token, `mutation{ createEndpoint(input: {name: "flooded", mode: LOG}){ id } }`, nil, &ep)
	return ep.CreateEndpoint.ID, up.SignUp.Token
}

// refusedRequests reads an address's count of refused requests.
func refusedRequests(t *testing.T, srv *httptest.Server, kind, id, token string) int {
	t.Helper()
	var out struct {
		Inspector, Endpoint struct{ RefusedRequests int }
	}
	gql(t, srv.URL, token, fmt.Sprintf(`query($id: ID!){ %s(id: $id){ refusedRequests } }`, kind), map[string]any{"id": id}, &out)
	return out.Inspector.RefusedRequests + out.Endpoint.RefusedRequests
}

// inspectorStored reads an inspector's stored bytes.
func inspectorStored(t *testing.T, srv *httptest.Server, id string) int64 {
	t.Helper()
	var out struct{ Inspector struct{ StoredBytes int64 } }
	gql(t, srv.URL, "", `query($id: ID!){ inspector(id: $id){ storedBytes } }`, map[string]any{"id": id}, &out)
	return out.Inspector.StoredBytes
}

// TestOperatorsSeeGuestsAndBodyBudget: the operator had no figure of what
// guest inspectors store together against --guest-storage, nor of what
// that bound refused, nor of which share of the body budget refused a
// sender. /metrics now gives the guests' stored bytes and budget, their
// refusals by what and reason, and the body budget's refusals by share.
func TestOperatorsSeeGuestsAndBodyBudget(t *testing.T) {
	const share = 2 << 10
	srv, a := strangersRelay(t, func(c *app.Config) {
		c.Commands.GuestStorage = domain.GuestStorage{Total: share * domain.GuestNetworkShares}
		c.Ingress.MaxBody, c.Ingress.ProxyBodyBudget = 1<<20, 4<<20
	})
	id, _ := guestInspector(t, srv)
	if status := post(t, srv, id, bytes.Repeat([]byte("g"), 4<<10)); status != http.StatusNoContent {
		t.Fatalf("the first delivery: %d, want 204", status)
	}
	caughtUp(t, a)
	if status := post(t, srv, id, []byte("{}")); status != http.StatusInsufficientStorage {
		t.Fatalf("a delivery past the network's share: %d, want 507", status)
	}
	if code := gqlCode(t, srv.URL, "", `mutation{ createInspector{ id } }`); code != "QUOTA_EXCEEDED" {
		t.Fatalf("createInspector past the network's share: %q, want QUOTA_EXCEEDED", code)
	}

	// One client holds its share of the body budget with a body it
	// trickles; its next body is refused by that share.
	_, token := tenantEndpoint(t, srv)
	var ep struct{ CreateEndpoint struct{ ID string } }
	gql(t, srv.URL, token, `mutation{ createEndpoint(input: {name: "proxy", mode: PROXY, target: "127.0.0.1:9"}){ id } }`, nil, &ep)
	caughtUp(t, a) // the Endpoint's route is known
	held, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	fmt.Fprintf(held, "POST /big HTTP/1.1\r\nHost: %s.localhost\r\nContent-Length: %d\r\n\r\nx", ep.CreateEndpoint.ID, 1<<20-1)
	heldAnswer := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(held)
		heldAnswer <- string(b)
	}()
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		select {
		case a := <-heldAnswer:
			t.Fatalf("the trickled body was answered: %q", a)
		default:
		}
		if n := metric(t, srv, "relay_body_budget_in_use_bytes"); n != 1<<20 {
			return fmt.Errorf("the body budget holds %v bytes, want the trickled body's reservation", n)
		}
		return nil
	})
	if status, text := sendBody(t, srv, ep.CreateEndpoint.ID, bytes.Repeat([]byte("b"), 1<<10)); status != http.StatusServiceUnavailable ||
		!strings.Contains(text, "full: client share") {
		t.Fatalf("a body past the client's share: %d %q, want 503 naming the client's share", status, text)
	}

	stored := inspectorStored(t, srv, id)
	for series, want := range map[string]float64{
		"relay_guest_storage_bytes": share * domain.GuestNetworkShares,
		"relay_guest_stored_bytes":  float64(stored),
		`relay_guest_storage_refusals_total{reason="network",what="delivery"}`: 1,
		`relay_guest_storage_refusals_total{reason="network",what="api"}`:      1,
		`relay_guest_storage_refusals_total{reason="guests",what="delivery"}`:  0,
		`relay_body_budget_refusals_total{share="client"}`:                     1,
		`relay_body_budget_refusals_total{share="network"}`:                    0,
		"relay_body_budget_bytes":                                              4 << 20,
	} {
		if got := metric(t, srv, series); got != want {
			t.Errorf("%s is %v, want %v", series, got, want)
		}
	}
	if !strings.Contains(get(t, srv.URL+"/metrics"), `relay_guest_storage_refusals_total{reason="guests",what="delivery"} 0`) {
		t.Errorf("metrics lack the guests' refusals:\n%s", grepLines(get(t, srv.URL+"/metrics"), "relay_guest_"))
	}
}
