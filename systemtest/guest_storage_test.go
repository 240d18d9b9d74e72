package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// guestClient makes the requests of one client address (a loopback
// address of its own, so of its own /24 when the third byte differs).
type guestClient struct {
	r *harness.Relay
	c *http.Client
}

func newGuestClient(r *harness.Relay, ip string) guestClient {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return guestClient{r: r, c: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", r.Port))
		},
		DisableKeepAlives: true,
	}}}
}

// createInspector returns the new inspector's id, or the error's code.
func (g guestClient) createInspector(t *testing.T) (id, code string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.r.BareURL()+"/graphql", strings.NewReader(`{"query":"mutation{ createInspector{ id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   struct{ CreateInspector struct{ ID string } }
		Errors []harness.GQLError
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("createInspector answered %s: %v", resp.Status, err)
	}
	if len(out.Errors) > 0 {
		return "", out.Errors[0].Code()
	}
	return out.Data.CreateInspector.ID, ""
}

// fill sends bodies to the inspector until it answers other than 204 (at
// most tries), each one once the views show the one before: it returns
// the last status and body.
func (g guestClient) fill(t *testing.T, id string, body []byte, tries int) (status int, text string) {
	t.Helper()
	for i := range tries {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.r.AddressHost(id)+fmt.Sprintf("/fill/%d", i), bytes.NewReader(body))
		resp, err := g.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return resp.StatusCode, string(b)
		}
		harness.Eventually(t, 10*time.Second, "the delivery in the views", func() bool {
			return len(inspectorNow(t, g.r, id).Deliveries.Nodes) == i+1
		})
	}
	return http.StatusNoContent, ""
}

// TestGuestStorageIsBoundedRelayWide: guest inspectors have no account
// whose quota counts them; each holds at most --inspector-quota, but a
// client creates 30 an hour and its /24 ten times that, and any number of
// networks may join in, so the relay's guests together were bounded by
// the disk alone, and at the disk reserve every team's deliveries are
// refused. Now every guest inspector's deliveries together take at most
// --guest-storage, and those created from one network a sixteenth of it:
// past either createInspector is QUOTA_EXCEEDED and a delivery to a guest
// 507, nothing recorded, while an account's Endpoint records as before.
func TestGuestStorageIsBoundedRelayWide(t *testing.T) {
	const (
		quota    = 32 << 10
		budget   = 512 << 10 // a network's share: 32 KiB, one full inspector
		networks = 24
	)
	r := harness.Start(t, "", "--inspector-quota", "32KiB", "--guest-storage", "512KiB",
		"--anonymous-rate", "1000/h,burst=1000", "--address-rate", "1000/s,burst=1000")
	body := bytes.Repeat([]byte("g"), 4<<10)
	var ids []string
	refusedCreate, refused507 := 0, 0
	stuff := func(g guestClient) {
		id, code := g.createInspector(t)
		switch code {
		case "":
		case "QUOTA_EXCEEDED":
			refusedCreate++
			return
		default:
			t.Fatalf("createInspector: %s", code)
		}
		ids = append(ids, id)
		switch status, text := g.fill(t, id, body, 20); status {
		case http.StatusTooManyRequests: // the inspector's own quota
		case http.StatusInsufficientStorage:
			if !strings.Contains(text, "storage for guest") {
				t.Fatalf("507 without naming the guests' storage: %q", text)
			}
			refused507++
		default:
			t.Fatalf("filling %s: %d %q", id, status, text)
		}
	}
	// One network's clients, four inspectors.
	for i := range 4 {
		stuff(newGuestClient(r, fmt.Sprintf("127.0.200.%d", i+1)))
	}
	oneNetwork := 0
	for _, id := range ids {
		oneNetwork += inspectorNow(t, r, id).StoredBytes
	}
	// Then a client on each of many networks, an inspector each.
	for n := range networks {
		stuff(newGuestClient(r, fmt.Sprintf("127.0.%d.1", n+1)))
	}
	stored := 0
	for _, id := range ids {
		stored += inspectorNow(t, r, id).StoredBytes
	}
	t.Logf("one network's 4 inspectors stored %d KiB (share %d KiB); %d networks' guests stored %d KiB in all (budget %d KiB); %d inspectors refused, %d fills ended 507",
		oneNetwork>>10, budget/16>>10, networks+1, stored>>10, budget>>10, refusedCreate, refused507)
	// What passes a bound is the delivery that reached it (one body and
	// its headers).
	const slop = 6 << 10
	if oneNetwork > budget/16+slop {
		t.Errorf("one network's inspectors stored %d KiB, want at most its share %d KiB", oneNetwork>>10, budget/16>>10)
	}
	if stored > budget+slop {
		t.Errorf("guests stored %d KiB, want at most --guest-storage %d KiB", stored>>10, budget>>10)
	}
	if refusedCreate == 0 || refused507 == 0 {
		t.Errorf("%d inspectors refused, %d fills ended 507: want both", refusedCreate, refused507)
	}
	// An account's Endpoint is not a guest: it records as before.
	acct := signUpTenant(t, r, "team")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "log", "mode": "LOG"})
	if resp := send(t, r, ep.ID, "POST", "/after-guests", nil, body); resp.Status != http.StatusNoContent {
		t.Fatalf("an Endpoint's delivery once guests are full: %d %q", resp.Status, resp.Body)
	}
}
