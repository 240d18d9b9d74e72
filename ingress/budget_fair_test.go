package ingress

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestBodyBudgetLeavesRoomForOthers: senders that declare large PROXY
// bodies and trickle them, from two networks to Endpoints of accounts of
// their own, or from many networks to one account's Endpoints, leave room
// in the body budget for another team's delivery: the last quarter of the
// budget is taken only by a client, network and account that each hold
// at most a sixteenth of it, and one account's Endpoints hold at most a
// quarter. The budget's total is never exceeded.
func TestBodyBudgetLeavesRoomForOthers(t *testing.T) {
	const (
		budget   = 8 << 20
		declared = 1<<20 - 1 // reserves 1 MiB: its length and one byte
	)
	type sender struct{ from, address, account string }
	twoNetworks := []sender{}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.1.2", "127.0.1.3"} {
		for range 3 {
			twoNetworks = append(twoNetworks, sender{ip, "e" + ip[6:7] + ip[8:], "acc-" + ip})
		}
	}
	manyNetworks := []sender{}
	for n := 1; n <= 8; n++ {
		manyNetworks = append(manyNetworks, sender{fmt.Sprintf("127.0.%d.2", n), fmt.Sprintf("a%d", n%2), "acc-a"})
	}
	for _, tt := range []struct {
		name    string
		senders []sender
		want    int64 // bytes the senders hold at the end
	}{
		// Each address its quarter, each /24 its half: before, the two
		// networks held the whole budget; now three quarters.
		{"two networks, each address to its own account's Endpoint", twoNetworks, budget * 3 / 4},
		// Each address and network holds one body: before, eight of them
		// held the whole budget; now the account's quarter.
		{"eight networks to one account's Endpoints", manyNetworks, budget / 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{MaxBody: 1 << 20, ProxyBodyBudget: budget})
			e.fwd.set(func(f *httpForwarder) {
				f.target = localServer(t, func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					fmt.Fprintf(w, "%d", len(b))
				})
			})
			e.routes.set(Route{ID: "victim", Kind: domain.AddressEndpoint, AccountID: "acc-victim", Mode: domain.ModeProxy})
			held, refused := 0, map[string]int{}
			for _, s := range tt.senders {
				e.routes.set(Route{ID: s.address, Kind: domain.AddressEndpoint, AccountID: s.account, Mode: domain.ModeProxy})
				if ok, answer := declareBody(t, e, s.from, s.address, declared, declared+1); ok {
					held++
				} else {
					refused[answer]++
				}
				if got := e.srv.bodies.InUse(); got > budget {
					t.Fatalf("bodies hold %d bytes of a %d-byte budget", got, budget)
				}
			}
			inUse := e.srv.bodies.InUse()
			t.Logf("%d bodies held (%d KiB of %d), refused %v", held, inUse>>10, budget>>10, refused)
			if inUse != tt.want || held+refused["503 Retry-After: 1"] != len(tt.senders) {
				t.Errorf("%d bodies of 1 MiB declared: %d held (%d bytes), refused %v; want %d bytes held, the rest refused 503",
					len(tt.senders), held, inUse, refused, tt.want)
			}
			// Another team, from another network, to its own Endpoint.
			if status, body := postSmall(t, e, "127.0.9.2", "victim"); status != http.StatusOK || body != "5" {
				t.Errorf("another team's 5-byte request with %d bytes of the budget held: %d %q, want 200 and its body forwarded", inUse, status, body)
			}
		})
	}
}
