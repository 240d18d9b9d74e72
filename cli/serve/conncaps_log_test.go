package serve

import (
	"strings"
	"testing"
)

// TestConnectionCapsLogged: the start's "connection caps" line gives the
// caps in force per address and per client network for requests in flight
// and WebSockets too, a per-network cap left at 0 as the
// clientkey.NetworkShare multiple it stands for.
func TestConnectionCapsLogged(t *testing.T) {
	r := startServe(t, "--max-requests-per-ip", "100", "--max-ws-per-ip", "8", "--max-ws-per-network", "40")
	want := "requests_per_ip=100 requests_per_network=400 ws_per_ip=8 ws_per_network=40"
	for _, line := range strings.Split(r.log(), "\n") {
		if strings.Contains(line, `msg="connection caps"`) {
			if !strings.Contains(line, want) {
				t.Errorf("start line %q does not say %q", line, want)
			}
			return
		}
	}
	t.Errorf("no connection caps line at the start:\n%s", r.log())
}
