package systemtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/systemtest/harness"
)

// requestDeviceCode asks for a device code as the client: its user code,
// or the error's code and message.
func (g guestClient) requestDeviceCode(t *testing.T, name string) (userCode, code, msg string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": `mutation($n: String!) { requestDeviceCode(clientName: $n) { userCode } }`,
		"variables": map[string]any{"n": name}})
	req, _ := http.NewRequest(http.MethodPost, g.r.BareURL()+"/graphql", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data   struct{ RequestDeviceCode struct{ UserCode string } }
		Errors []harness.GQLError
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("requestDeviceCode answered %s: %v", resp.Status, err)
	}
	if len(out.Errors) > 0 {
		return "", out.Errors[0].Code(), out.Errors[0].Message
	}
	return out.Data.RequestDeviceCode.UserCode, "", ""
}

// TestDeviceCodeNetworkShareSurvivesARestart: the device codes a client
// network (IPv4 /24) has waiting hold at most a sixteenth of the relay's
// budget (62 of 1 000), and they are counted from the views, which the
// relay keeps across a restart or a crash and rebuilds from the log: once
// one network holds its share, the relay started again still refuses that
// network QUOTA_EXCEEDED naming its share, and still issues another
// network's code.
func TestDeviceCodeNetworkShareSurvivesARestart(t *testing.T) {
	share := domain.DeviceCodeNetworkShare(domain.MaxPendingDeviceCodes)
	for _, tc := range []struct {
		name string
		down func(*harness.Relay, testing.TB)
	}{
		{"stopped", (*harness.Relay).Stop},
		{"killed", (*harness.Relay).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := harness.Start(t, "", "--anonymous-rate", "1000/h,burst=1000")
			for i := range share {
				g := newGuestClient(r, fmt.Sprintf("127.0.1.%d", i%8+1))
				if _, code, msg := g.requestDeviceCode(t, fmt.Sprintf("host-%d", i)); code != "" {
					t.Fatalf("device code %d of the network's share of %d: %s %s", i+1, share, code, msg)
				}
			}
			tc.down(r, t)
			r.Restart(t)
			_, code, msg := newGuestClient(r, "127.0.1.9").requestDeviceCode(t, "one-more")
			other, otherCode, otherMsg := newGuestClient(r, "127.0.2.1").requestDeviceCode(t, "elsewhere")
			t.Logf("after %d codes of one network and a restart: that network %q %q; another network %q %s %s", share, code, msg, other, otherCode, otherMsg)
			if code != "QUOTA_EXCEEDED" || !strings.Contains(msg, "127.0.1.0/24") {
				t.Errorf("a code past the network's share after a restart: %q %q, want QUOTA_EXCEEDED naming 127.0.1.0/24", code, msg)
			}
			if other == "" {
				t.Errorf("another network's code after a restart: %s %s", otherCode, otherMsg)
			}
		})
	}
}
