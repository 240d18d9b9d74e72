// Package clientkey names the client a per-client limit counts against:
// its IP, or its /64 for IPv6, since one IPv6 client commonly holds a
// whole /64 and could otherwise pick a fresh address for every connection
// or request. Every per-client bound of the relay (connections, requests in
// flight, the body budget's share, smee streams, WebSocket sockets,
// anonymous rates) counts
// by this one key; those of things held open (Caps) and the shares of
// shared budgets also count each client's network (Network).
package clientkey

import (
	"net"
	"net/netip"
	"strings"
)

// Of is the key of a peer's address given as host:port or as a bare IP;
// anything else is its own key.
func Of(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ofIP(ap.Addr())
	}
	if ip, err := netip.ParseAddr(addr); err == nil {
		return ofIP(ip)
	}
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// OfAddr is the key of a connection's remote address.
func OfAddr(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(tcp.IP); ok {
			return ofIP(ip)
		}
	}
	return Of(a.String())
}

func ofIP(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// Network is the network a client key (as Of makes it) belongs to: the
// /24 of an IPv4 address, the /48 of an IPv6 /64, the most one site
// commonly holds. Per-client maps bound what one network's keys may take
// of them, since a /48 is 65 536 keys. A key that is not a client
// address's has no network: "".
func Network(key string) string {
	// Only a key with a '/' can be a prefix: asking ParsePrefix of a bare
	// address would build an error, several times a request.
	if strings.IndexByte(key, '/') >= 0 {
		if p, err := netip.ParsePrefix(key); err == nil && p.Addr().Is6() && p.Bits() >= 48 {
			return prefixString(netip.PrefixFrom(p.Addr(), 48).Masked())
		}
	}
	if ip, err := netip.ParseAddr(key); err == nil {
		ip = ip.Unmap().WithZone("")
		if ip.Is4() {
			return prefixString(netip.PrefixFrom(ip, 24).Masked())
		}
		return prefixString(netip.PrefixFrom(ip, 48).Masked())
	}
	return ""
}

// prefixString is p.String() in one allocation (String makes two).
func prefixString(p netip.Prefix) string {
	var buf [64]byte // an IPv6 prefix takes at most 43
	return string(p.AppendTo(buf[:0]))
}
