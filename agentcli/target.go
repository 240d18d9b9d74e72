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
//	localhost:3000/api            http://localhost:3000/api
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
		return t, validHost(s, t.Host)
	}
	in := s
	if !strings.Contains(s, "://") {
		if !strings.Contains(s, "/") {
			if err := validHost(in, s); err != nil {
				return Target{}, err
			}
			return Target{Scheme: "http", Host: s}, nil
		}
		// localhost:3000/ or localhost:3000/api, as copied from a
		// browser's address bar without its scheme: http.
		s = "http://" + s
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
	if err := validHost(in, t.Host); err != nil {
		return Target{}, err
	}
	prefix := u.EscapedPath()
	if strings.ContainsAny(prefix, " \t\r\n\x7f") {
		return Target{}, fmt.Errorf("target %q: invalid path", s)
	}
	t.Prefix = strings.TrimRight(prefix, "/")
	return t, nil
}

// dotSpellings turns, in a lowercased path, the spellings a local server
// may resolve as a dot or a separator into plain ones: %2e is ".", %2f
// and %5c and a backslash are "/" (servers differ on which they decode
// before resolving dot-segments; all are taken as the worst case).
var dotSpellings = strings.NewReplacer("%2e", ".", "%2f", "/", "%5c", "/", `\`, "/")

// hasDotSegment reports whether the path of a request target (before its
// query) holds a "." or ".." segment in any of those spellings, also with
// path parameters (Tomcat reads "..;x" as ".."). Under a prefix such a
// segment could lead the local server out of it: /api + /../admin is
// /admin.
func hasDotSegment(raw string) bool {
	path, _, _ := strings.Cut(raw, "?")
	for _, seg := range strings.Split(dotSpellings.Replace(strings.ToLower(path)), "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// DotSegmentError refuses a delivery whose path has a dot-segment when the
// target has a prefix: forwarded as recorded, it could reach a path of the
// local server outside the prefix; resolved, it would no longer be the
// path the sender sent. The sender is answered 400 with Failure.
type DotSegmentError struct {
	Path   string // the request target as recorded
	Target Target
}

func (e *DotSegmentError) Error() string {
	return fmt.Sprintf("request target %q has a dot-segment (. or ..) that could leave the target's path %s: not forwarded", e.Path, e.Target.Prefix)
}

// Failure is the text the sender reads: the rule, the target, not the path
// (the sender knows what it sent).
func (e *DotSegmentError) Failure() string {
	return "the agent forwards no path with a . or .. segment to the local target " + e.Target.String()
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == s
}

// validHost checks the host:port of target in, the target as the user
// gave it; a refusal lists every form a target takes, not only the
// host:port the relay stores.
func validHost(in, hostport string) error {
	if err := domain.ValidateTarget(hostport); err != nil {
		return fmt.Errorf("target %q: want a port (3000), localhost:PORT, 127.0.0.1:PORT or a URL such as http://localhost:3000/api (the agent forwards only to this machine: the host must be 127.0.0.1 or localhost)", in)
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
