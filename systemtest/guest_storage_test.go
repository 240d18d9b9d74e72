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

// sharedBudget is what a run against a storage budget shared by client
// networks (--guest-storage, --signup-storage) saw: the bytes what one
// network made stores, those all networks' store, and how many creations
// and deliveries the budget refused.
type sharedBudget struct {
	flag, made                string // the budget's flag; what a network makes ("inspectors")
	budget, slop              int64  // the flag's bytes; what the delivery that reaches a bound may pass it by
	oneNetwork, all           int64
	refusedCreate, refused507 int
}

// assertSharedBudget fails unless one network stored at most its share
// (a sixteenth), all networks at most the whole budget, each give or
// take b.slop, and the budget refused both a creation and a delivery.
func assertSharedBudget(t *testing.T, b sharedBudget) {
	t.Helper()
	share := b.budget / 16
	t.Logf("one network's %s stored %d KiB (share %d KiB); all networks' %s stored %d KiB (%s %d KiB); %d created refused, %d deliveries 507",
		b.made, b.oneNetwork>>10, share>>10, b.made, b.all>>10, b.flag, b.budget>>10, b.refusedCreate, b.refused507)
	if b.oneNetwork > share+b.slop {
		t.Errorf("one network's %s stored %d KiB, want at most its share %d KiB", b.made, b.oneNetwork>>10, share>>10)
	}
	if b.all > b.budget+b.slop {
		t.Errorf("%s stored %d KiB, want at most %s %d KiB", b.made, b.all>>10, b.flag, b.budget>>10)
	}
	if b.refusedCreate == 0 || b.refused507 == 0 {
		t.Errorf("%d %s refused, %d fills ended 507: want both", b.refusedCreate, b.made, b.refused507)
	}
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
	// What passes a bound is the delivery that reached it (one body of
	// 4 KiB and its headers).
	assertSharedBudget(t, sharedBudget{
		flag: "--guest-storage", made: "inspectors", budget: budget, slop: 6 << 10,
		oneNetwork: int64(oneNetwork), all: int64(stored), refusedCreate: refusedCreate, refused507: refused507,
	})
	// An account's Endpoint is not a guest: it records as before.
	acct := signUpTenant(t, r, "team")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "log", "mode": "LOG"})
	if resp := send(t, r, ep.ID, "POST", "/after-guests", nil, body); resp.Status != http.StatusNoContent {
		t.Fatalf("an Endpoint's delivery once guests are full: %d %q", resp.Status, resp.Body)
	}
}
