// Package clientkey names the client a per-client limit counts against:
// its IP, or its /64 for IPv6, since one IPv6 client commonly holds a
// whole /64 and could otherwise pick a fresh address for every connection
// or request. Every per-client bound of the relay (connections, requests in
// flight, the body budget's share, smee streams, WebSocket sockets,
// anonymous rates) counts
// by this one key.
package clientkey

import (
	"net"
	"net/netip"
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
