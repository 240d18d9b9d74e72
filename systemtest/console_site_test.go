package systemtest

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestServeWarnsOfASharedSite: a relay whose console shares the addresses'
// site over plain HTTP on a name others reach warns at start, and says
// what to do; one with --console-url, or on localhost, does not. A relay
// with --signin-rate off says so. A console host on the addresses' site is
// refused before anything starts.
func TestServeWarnsOfASharedSite(t *testing.T) {
	const warning = "cookie tossing"
	tests := []struct {
		name  string
		args  []string
		warns []string
		quiet []string
	}{
		{"shared site over plain HTTP", []string{"--domain", "relay.example.net"}, []string{warning, "--console-url"}, nil},
		{"console on its own site", []string{"--domain", "relay.example.net", "--console-url", "http://console.example.org"}, nil, []string{warning}},
		{"loopback", nil, nil, []string{warning, "--signin-rate off"}},
		{"sign-in limits off", []string{"--signin-rate", "off"}, []string{"--signin-rate off"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := harness.Start(t, "", tt.args...)
			// The warnings follow "relay started", which may come after
			// the relay first answers.
			harness.Eventually(t, 10*time.Second, "the start-up log", func() bool {
				out := r.Output()
				for _, w := range tt.warns {
					if !strings.Contains(out, w) {
						return false
					}
				}
				return strings.Contains(out, "relay started")
			})
			out := r.Output()
			for _, q := range tt.quiet {
				if strings.Contains(out, q) {
					t.Errorf("the start-up log says %q:\n%s", q, out)
				}
			}
		})
	}

	out, code := harness.RunCLI(t, "serve", "--listen", "127.0.0.1:0", "--data", t.TempDir(),
		"--domain", "relay.example.com", "--console-url", "https://console.example.com")
	if code == 0 || !strings.Contains(out, "shares a site") {
		t.Errorf("a console beside the addresses: exit %d:\n%s", code, out)
	}
}

// TestTLSCertificateMustNameTheConsole: with --tls-cert and --console-url
// the one certificate serves the console host too, so one that does not
// name it stops the start; one that does starts.
func TestTLSCertificateMustNameTheConsole(t *testing.T) {
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "localhost", "*.localhost")
	out, code := harness.RunCLI(t, "serve", "--listen", "127.0.0.1:"+strconv.Itoa(harness.FreePort(t)), "--data", t.TempDir(),
		"--tls-cert", cert, "--tls-key", key, "--console-url", "https://console.example.org")
	if code == 0 || !strings.Contains(out, "does not name the console host console.example.org") {
		t.Fatalf("a certificate without the console host: exit %d:\n%s", code, out)
	}
	cert, key = ca.Issue(t, t.TempDir(), 2, "localhost", "*.localhost", "console.example.org")
	r := harness.StartTLS(t, "", ca, cert, key, "--console-url", "https://console.example.org")
	harness.Eventually(t, 10*time.Second, "the console's URL in the start-up log", func() bool {
		return strings.Contains(r.Output(), "console:   https://console.example.org:"+strconv.Itoa(r.Port))
	})
}
