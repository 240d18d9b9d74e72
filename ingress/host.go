package ingress

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/relayhq/relay/domain"
)

// ParseHost tells which public address a Host header names. host may carry a
// port ("abc.localhost:8080") and a trailing dot; names compare without case.
// "<id>.<domain>" yields the address id (one DNS label that passes
// domain.ValidateAddressID); exactly "<domain>" is the bare domain; anything
// else (other domains, nested labels, empty) is not ours. An IP literal
// (127.0.0.1:8080, [::1]:8080) is the bare domain too: no address is an IP,
// and `relay agent --server http://127.0.0.1:8080` must reach the API.
func ParseHost(host, domainName string) (address string, bare bool, ok bool) {
	if isIPHost(host) {
		return "", true, true
	}
	name, ok := stripPort(host)
	if !ok {
		return "", false, false
	}
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	base := strings.TrimSuffix(strings.ToLower(domainName), ".")
	if name == "" || base == "" {
		return "", false, false
	}
	if name == base {
		return "", true, true
	}
	label, found := strings.CutSuffix(name, "."+base)
	if !found || domain.ValidateAddressID(label) != nil {
		return "", false, false
	}
	return label, false, true
}

// isIPHost reports whether host is an IP literal with an optional port.
// Every request asks (twice), so a name allocates nothing: SplitHostPort
// is asked only when there is a port and ParseAddr only when it could be
// an IP (their errors would allocate); netip.ParseAddr with no zone is
// net.ParseIP without the copy.
func isIPHost(host string) bool {
	if strings.IndexByte(host, ':') >= 0 {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	host = strings.Trim(host, "[]")
	if !strings.Contains(host, ":") && strings.ContainsFunc(host, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) {
		return false // a name: not IPv6, and IPv4 is digits and dots
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == ""
}

// stripPort removes ":port" from host. Bracketed IPv6 literals and hosts
// with several colons are refused: no public address is an IP.
func stripPort(host string) (string, bool) {
	if strings.HasPrefix(host, "[") {
		return "", false
	}
	name, port, found := strings.Cut(host, ":")
	if !found {
		return host, true
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return name, true
}

// consoleHost tells whether host (a Host header, with an optional port)
// names the console's own host (Config.ConsoleSite). The port is not
// compared: a proxy in front may or may not pass it on, and the name
// alone is never an address (serve refuses a console host on the
// addresses' site).
func (s *Server) consoleHost(host string) bool {
	if s.consoleName == "" || s.deps.Console == nil {
		return false
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	return strings.EqualFold(strings.TrimSuffix(name, "."), s.consoleName)
}

// IsConsole tells whether r is for the console's own host.
func (s *Server) IsConsole(r *http.Request) bool { return s.consoleHost(r.Host) }
