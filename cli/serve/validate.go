package serve

// The checks of serve's flags, together: a setting that cannot work is
// refused at start, with what to give instead.

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/net/publicsuffix"

	"github.com/relayhq/relay/cluster"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/eventstore/jetstream"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/graph/answersize"
	"github.com/relayhq/relay/internal/forwarded"
)

func (c *serveConfig) validate() error {
	c.settleAccountQuotas()
	switch {
	case c.InspectorTTL <= 0:
		return fmt.Errorf("--inspector-ttl must be positive")
	case c.QueueBacklog < 1 || c.QueueBacklog > 10_000_000:
		return fmt.Errorf("--queue-backlog %d: must be from 1 to 10000000", c.QueueBacklog)
	case c.ForwardTimeout <= 0:
		return fmt.Errorf("--forward-timeout must be positive")
	case c.ViewsWait <= 0:
		return fmt.Errorf("--views-wait must be positive")
	case c.MaxBody > evidence.MaxEventBody:
		// The largest event, and so what relay events verify reads of an
		// export line, follows from it (evidence.MaxExportLine).
		return fmt.Errorf("--max-body (%s) must not exceed %s: the log's events are bounded by it", c.MaxBody.String(), humanize.IBytes(evidence.MaxEventBody))
	case c.CaptureCap > c.MaxBody:
		return fmt.Errorf("--capture-cap (%s) must not exceed --max-body (%s)", c.CaptureCap.String(), c.MaxBody.String())
	case c.KeepAlive <= 0:
		return fmt.Errorf("--keepalive must be positive")
	case c.MaxWSSubscriptions < 1:
		return fmt.Errorf("--max-ws-subscriptions must be at least 1")
	case c.MaxWSPerIP < 1:
		return fmt.Errorf("--max-ws-per-ip must be at least 1")
	case c.MaxWSPerNet != 0 && c.MaxWSPerNet < c.MaxWSPerIP:
		return fmt.Errorf("--max-ws-per-network (%d) must be 0 or at least --max-ws-per-ip (%d)", c.MaxWSPerNet, c.MaxWSPerIP)
	case c.MaxEndpointSessions < 1 || c.MaxEndpointSessions > domain.MaxEndpointSessions:
		// Above it an Endpoint's open sessions no longer fit the views'
		// read of its listeners.
		return fmt.Errorf("--max-endpoint-sessions must be between 1 and %d", domain.MaxEndpointSessions)
	case c.MaxAccountSessions < 1:
		return fmt.Errorf("--max-account-sessions must be at least 1")
	case c.Domain == "":
		return fmt.Errorf("--domain must not be empty")
	case !hostPort(c.Listen):
		return fmt.Errorf("--listen %q: want host:port, such as 127.0.0.1:%s (or :%s for every interface)", c.Listen, portOf(c.Listen), portOf(c.Listen))
	case c.HTTPListen != "" && !hostPort(c.HTTPListen):
		return fmt.Errorf("--http-listen %q: want host:port, such as 0.0.0.0:%s", c.HTTPListen, portOf(c.HTTPListen))
	case c.IdleTimeout <= 0:
		return fmt.Errorf("--idle-timeout must be positive")
	case c.BodyTimeout <= 0:
		return fmt.Errorf("--body-timeout must be positive")
	case c.MaxConnsPerIP < 1:
		return fmt.Errorf("--max-conns-per-ip must be at least 1")
	case c.MaxConnsPerNet != 0 && c.MaxConnsPerNet < c.MaxConnsPerIP:
		return fmt.Errorf("--max-conns-per-network (%d) must be 0 or at least --max-conns-per-ip (%d)", c.MaxConnsPerNet, c.MaxConnsPerIP)
	case c.MaxRequestsPerIP < 0:
		return fmt.Errorf("--max-requests-per-ip must be 0 (no cap) or more")
	case c.MaxRequestsPerNet != 0 && (c.MaxRequestsPerIP == 0 || c.MaxRequestsPerNet < c.MaxRequestsPerIP):
		// With no cap per client there is none per network either.
		return fmt.Errorf("--max-requests-per-network (%d) must be 0 or at least --max-requests-per-ip (%d), which must not be 0", c.MaxRequestsPerNet, c.MaxRequestsPerIP)
	case c.AccountEndpoints < 0:
		return fmt.Errorf("--account-endpoints must be 0 (no limit) or more")
	case c.MaxHeaders < 1:
		return fmt.Errorf("--max-headers must be at least 1")
	case c.MaxHeaderBytes < 1<<10 || c.MaxHeaderBytes > evidence.MaxEventText:
		return fmt.Errorf("--max-header-bytes must be between 1KiB and %s (the log's events are bounded by it)", humanize.IBytes(evidence.MaxEventText))
	case c.MaxAPIBody < 1<<10:
		return fmt.Errorf("--max-api-body (%s) must be at least 1KiB", c.MaxAPIBody.String())
	case c.ProxyBodies < c.MaxBody:
		return fmt.Errorf("--proxy-body-budget (%s) must be at least --max-body (%s)", c.ProxyBodies.String(), c.MaxBody.String())
	case c.MaxAPIAnswer < 1<<20:
		return fmt.Errorf("--max-api-answer (%s) must be at least 1MiB", c.MaxAPIAnswer.String())
	case c.APIAnswers < answersize.HeapPerByte*c.MaxAPIAnswer:
		// The budget counts the heap an answer takes, HeapPerByte a byte:
		// less would refuse the largest answer allowed every time.
		return fmt.Errorf("--api-answer-budget (%s) must be at least %d times --max-api-answer (%s), the heap the largest answer takes",
			c.APIAnswers.String(), answersize.HeapPerByte, c.MaxAPIAnswer.String())
	case c.MaxQueryCost < 2000:
		return fmt.Errorf("--max-query-cost must be at least 2000 (one mutation costs 1000 and more)")
	case c.MaxQueryFields < 10:
		return fmt.Errorf("--max-query-fields must be at least 10")
	case c.MaxQueryTokens < 100:
		return fmt.Errorf("--max-query-tokens must be at least 100")
	case c.RefusalInterval <= 0:
		return fmt.Errorf("--refusal-interval must be positive")
	case c.InspectorRetention <= 0:
		return fmt.Errorf("--inspector-retention must be positive")
	}
	if err := c.validateRetention(); err != nil {
		return err
	}
	if err := c.validateDeployment(); err != nil {
		return err
	}
	if err := c.validateConsole(); err != nil {
		return err
	}
	if jetstream.IsURL(c.EventStore) {
		if _, _, err := jetstream.ParseURL(c.EventStore); err != nil {
			return fmt.Errorf("--eventstore: %w", err)
		}
	}
	return c.validateCluster()
}

// validateRetention checks the Endpoints' windows: the default lies
// within the bounds.
func (c *serveConfig) validateRetention() error {
	l := c.retentionLimits()
	switch {
	case l.Min <= 0:
		return fmt.Errorf("--min-retention must be positive")
	case l.Default <= 0:
		return fmt.Errorf("--retention must be positive")
	case l.Default < l.Min:
		return fmt.Errorf("--retention (%s) must be at least --min-retention (%s)", duration.Format(l.Default), duration.Format(l.Min))
	case l.Max < l.Default:
		return fmt.Errorf("--max-retention (%s) must be at least --retention (%s)", duration.Format(l.Max), duration.Format(l.Default))
	}
	return nil
}

// validateCluster checks the flags of several nodes.
func (c *serveConfig) validateCluster() error {
	switch {
	case c.NodeLease < 100*time.Millisecond:
		return fmt.Errorf("--node-lease must be at least 100ms")
	case c.NodeID != "":
		if err := cluster.ValidNodeID(c.NodeID); err != nil {
			return fmt.Errorf("--node-id: %w", err)
		}
	}
	if c.Bus == "" {
		return nil
	}
	if _, err := cluster.ParseServers(c.Bus); err != nil {
		return fmt.Errorf("--bus: %w", err)
	}
	if c.EventStore == "" {
		return fmt.Errorf("--bus needs a shared --eventstore (nats:// or esdb://): nodes on their own embedded logs would not see each other's deliveries")
	}
	return nil
}

// validateDeployment checks the TLS and proxy flags and derives
// publicURL, trusted and, from --public-url, the domain.
func (c *serveConfig) validateDeployment() error {
	tls := c.TLSCert != "" || c.TLSKey != ""
	switch {
	case tls && (c.TLSCert == "" || c.TLSKey == ""):
		return fmt.Errorf("--tls-cert and --tls-key go together: give both")
	case c.HTTPListen != "" && !tls:
		return fmt.Errorf("--http-listen serves plain HTTP beside TLS: it needs --tls-cert and --tls-key")
	case c.TLSReloadInterval <= 0:
		return fmt.Errorf("--tls-reload-interval must be positive")
	case c.TLSHandshakeTimeout <= 0:
		return fmt.Errorf("--tls-handshake-timeout must be positive")
	case c.PublicURL != "" && c.PublicPort != 0:
		return fmt.Errorf("--public-url already names the port: leave out --public-port")
	}
	trusted, err := forwarded.ParseTrusted(c.TrustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	c.trusted = trusted
	if c.PublicURL == "" {
		return nil
	}
	u, err := url.Parse(c.PublicURL)
	switch {
	case err != nil:
		return fmt.Errorf("--public-url: %w", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("--public-url %q: the scheme must be https or http", c.PublicURL)
	case u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("--public-url %q: give only a scheme, the domain and an optional port (https://relay.example.com)", c.PublicURL)
	case tls && u.Scheme != "https":
		return fmt.Errorf("--public-url %q: with --tls-cert the public URLs are https", c.PublicURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--public-url %q: bad port", c.PublicURL)
		}
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case c.domainSet == nil || !c.domainSet():
		c.Domain = host
	case !strings.EqualFold(strings.TrimSuffix(c.Domain, "."), host):
		return fmt.Errorf("--public-url host %q is not --domain %q: addresses are <id>.<domain> (leave out --domain to take it from --public-url)", host, c.Domain)
	}
	c.publicURL = u
	return nil
}

// validateConsole checks --console-url: a scheme and a host only, and a
// host on another site than the addresses, since a page of a site may set
// cookies for the whole site (see docs/security.md, "Session cookies").
func (c *serveConfig) validateConsole() error {
	if c.ConsoleURL == "" {
		return nil
	}
	u, err := url.Parse(c.ConsoleURL)
	switch {
	case err != nil:
		return fmt.Errorf("--console-url: %w", err)
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("--console-url %q: the scheme must be https or http", c.ConsoleURL)
	case u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("--console-url %q: give only a scheme, the host and an optional port (https://console.example.com)", c.ConsoleURL)
	case c.TLSCert != "" && u.Scheme != "https":
		return fmt.Errorf("--console-url %q: with --tls-cert the console is https", c.ConsoleURL)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--console-url %q: bad port", c.ConsoleURL)
		}
	}
	if sameSite(u.Hostname(), c.Domain) {
		return fmt.Errorf("--console-url host %q shares a site with --domain %q: an address page could set the console's cookies; put the console on another registrable domain (console.example.org beside relay.example.com)", u.Hostname(), c.Domain)
	}
	c.console = u
	return nil
}

// sameSite tells whether a console on host would share a site (the
// registrable domain, public suffix list) with the addresses <id>.<domain>.
// Names without a registrable domain (localhost, IP literals) compare as
// they are, and a host that is the domain or one of its addresses is the
// same site whatever the list says.
func sameSite(host, domainName string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	domainName = strings.TrimSuffix(strings.ToLower(domainName), ".")
	if host == domainName || strings.HasSuffix(host, "."+domainName) {
		return true
	}
	if net.ParseIP(host) != nil {
		return false
	}
	a, errA := publicsuffix.EffectiveTLDPlusOne(host)
	b, errB := publicsuffix.EffectiveTLDPlusOne(domainName)
	return errA == nil && errB == nil && a == b
}

// sharedSiteRisk tells whether the console shares the addresses' site over
// plain HTTP on a name others can reach: then an address page can toss a
// session cookie at it (docs/security.md), and serve warns at start.
func (c *serveConfig) sharedSiteRisk(urls publicURLs) bool {
	if c.console != nil || urls.scheme == "https" {
		return false
	}
	return !loopbackName(c.Domain)
}

// loopbackName tells whether name only ever reaches this machine.
func loopbackName(name string) bool {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if ip := net.ParseIP(name); ip != nil {
		return ip.IsLoopback()
	}
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// hostPort tells whether addr is an address to listen on: host:port, the
// host possibly empty (every interface), not a bare port or host.
func hostPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != ""
}

// portOf is the port to show in --listen's example: addr itself when it is
// a number (a bare port), else 8080.
func portOf(addr string) string {
	if n, err := strconv.Atoi(addr); err == nil && n > 0 && n < 65536 {
		return addr
	}
	return "8080"
}
