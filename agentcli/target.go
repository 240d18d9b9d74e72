package agentcli

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/relayhq/relay/domain"
)

// Target is where the agent sends an Endpoint's requests: a server on this
// machine's loopback, over http or https, with an optional path prefix put
// in front of every recorded path.
type Target struct {
	Scheme string // "http" or "https"
	Host   string // localhost:PORT or 127.0.0.1:PORT (domain.ValidateTarget)
	Prefix string // "" or a path starting with "/", without a trailing "/"
}

// String is the target as a URL: http://localhost:3000/api.
func (t Target) String() string { return t.Scheme + "://" + t.Host + t.Prefix }

// ParseTarget reads a target as a user gives it:
//
//	3000                          http://localhost:3000
//	127.0.0.1:3000                http://127.0.0.1:3000
//	http://localhost:3000/api     recorded /hook goes to /api/hook
//	https://localhost:8443        https; self-signed needs Options.Insecure
//
// The host must be localhost or 127.0.0.1: the agent forwards to the
// developer's own machine only. A URL may not carry a query, fragment or
// user info; a URL without a port uses its scheme's.
func ParseTarget(s string) (Target, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Target{}, fmt.Errorf("empty target")
	}
	if isPort(s) {
		t := Target{Scheme: "http", Host: "localhost:" + s}
		return t, validHost(t.Host)
	}
	if !strings.Contains(s, "://") {
		if err := validHost(s); err != nil {
			return Target{}, err
		}
		return Target{Scheme: "http", Host: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return Target{}, fmt.Errorf("target %q: %w", s, err)
	}
	t := Target{Scheme: strings.ToLower(u.Scheme)}
	switch {
	case t.Scheme != "http" && t.Scheme != "https":
		return Target{}, fmt.Errorf("target %q: scheme must be http or https", s)
	case u.User != nil, u.RawQuery != "", u.ForceQuery, u.Fragment != "", u.Opaque != "":
		return Target{}, fmt.Errorf("target %q: only scheme, host, port and path are allowed", s)
	}
	t.Host = u.Host
	if u.Port() == "" {
		port := "80"
		if t.Scheme == "https" {
			port = "443"
		}
		t.Host = net.JoinHostPort(u.Hostname(), port)
	}
	if err := validHost(t.Host); err != nil {
		return Target{}, err
	}
	prefix := u.EscapedPath()
	if strings.ContainsAny(prefix, " \t\r\n\x7f") {
		return Target{}, fmt.Errorf("target %q: invalid path", s)
	}
	t.Prefix = strings.TrimRight(prefix, "/")
	return t, nil
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == s
}

func validHost(hostport string) error {
	if err := domain.ValidateTarget(hostport); err != nil {
		return fmt.Errorf("target %q: %w", hostport, err)
	}
	return nil
}

// ParseRoute reads an --endpoint value: ID, or ID=TARGET.
func ParseRoute(s string) (Route, error) {
	id, target, hasTarget := strings.Cut(s, "=")
	id = strings.TrimSpace(id)
	if err := domain.ValidateAddressID(id); err != nil {
		return Route{}, fmt.Errorf("endpoint %q: %w", id, err)
	}
	r := Route{EndpointID: id}
	if hasTarget {
		if _, err := ParseTarget(target); err != nil {
			return Route{}, err
		}
		r.Target = strings.TrimSpace(target)
	}
	return r, nil
}
