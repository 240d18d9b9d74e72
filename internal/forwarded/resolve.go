package forwarded

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is the set of peers whose forwarding headers are believed.
type Trusted []netip.Prefix

// ParseTrusted reads a comma-separated list of CIDR prefixes or single
// addresses ("10.0.0.0/8,127.0.0.1"). Empty: nobody is trusted.
func ParseTrusted(s string) (Trusted, error) {
	var out Trusted
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		ip, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR prefix nor an IP address", part)
		}
		ip = ip.Unmap()
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out, nil
}

// Contains reports whether ip is trusted.
func (t Trusted) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range t {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ContainsHost is Contains for an address in text ("127.0.0.1"); false
// when it is none.
func (t Trusted) ContainsHost(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && t.Contains(ip)
}

// Client is who sent a request and how, as far as the relay can tell.
type Client struct {
	// Addr is the sender: the TCP peer's "ip:port", or the address a
	// trusted proxy names ("ip", or "ip:port" when the proxy gave a port).
	Addr string
	// Proto is "https" or "http": the protocol the sender used.
	Proto string
	// Known tells that Proto is known rather than assumed: the connection
	// is TLS, a trusted proxy said so, or the relay serves TLS itself (so a
	// plain connection is known to be plain).
	Known bool
	// Peer is the TCP peer when it is a trusted proxy (empty otherwise).
	Peer string
}

// Resolver turns requests into their Client.
type Resolver struct {
	Trusted Trusted
	// TLS is set when the relay serves TLS itself: a plain connection is
	// then known to be plain HTTP.
	TLS bool
	// Scheme is assumed for a plain connection when TLS is off and no
	// trusted proxy tells: the public URLs' scheme (a proxy in front that
	// is not trusted may have terminated TLS).
	Scheme string
}

// Resolve tells who sent r. From a trusted peer, X-Forwarded-For and
// X-Forwarded-Proto are read when present, else Forwarded: proxies that
// set one usually pass the other through from the sender untouched, and
// X-Forwarded-For is what Caddy, nginx and most load balancers set. The
// sender is the nearest address in the chain that is not itself trusted
// (entries further left were written by the sender, who can write
// anything).
func (rv Resolver) Resolve(r *http.Request) Client {
	c := Client{Addr: r.RemoteAddr, Proto: "http", Known: rv.TLS}
	switch {
	case r.TLS != nil:
		c.Proto, c.Known = "https", true
	case !rv.TLS && rv.Scheme != "":
		c.Proto = rv.Scheme
	}
	peer, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || !rv.Trusted.ContainsHost(peer) {
		return c
	}
	c.Peer = r.RemoteAddr
	var chain []string // nodes, farthest first
	var proto string
	xff, xfp := r.Header.Values("X-Forwarded-For"), List(r.Header.Values("X-Forwarded-Proto"))
	if len(xff) > 0 || len(xfp) > 0 {
		chain = List(xff)
		if len(xfp) > 0 {
			proto = xfp[len(xfp)-1]
		}
	} else if elems, err := Parse(r.Header.Values("Forwarded")); err == nil && len(elems) > 0 {
		for _, e := range elems {
			chain = append(chain, e.For)
		}
		proto = elems[len(elems)-1].Proto
	}
	if addr, ok := rv.sender(chain); ok {
		c.Addr = addr
	}
	switch proto = strings.ToLower(proto); proto {
	case "https", "http":
		c.Proto, c.Known = proto, true
	case "wss", "ws": // a proxy that names the WebSocket scheme
		c.Proto, c.Known = strings.Replace(proto, "ws", "http", 1), true
	}
	return c
}

// sender walks the chain from the nearest end past trusted proxies.
// Entries that are not addresses ("unknown", obfuscated) stop the walk:
// nothing further left can be tied to a trusted writer.
func (rv Resolver) sender(chain []string) (string, bool) {
	var last string
	for i := len(chain) - 1; i >= 0; i-- {
		ip, port, ok := NodeAddr(chain[i])
		if !ok {
			return last, last != ""
		}
		last = ip.String()
		if port != "" && port != "0" {
			last = net.JoinHostPort(ip.String(), port)
		}
		if !rv.Trusted.Contains(ip) {
			return last, true
		}
	}
	return last, last != "" // every hop is trusted: the farthest is the sender
}

type ctxKey struct{}

// clientCtx carries a request's Client. It is context.WithValue in one
// allocation instead of two: the Client is not boxed in an interface, and
// Value hands out the context itself, a pointer. Every other key, the
// context package's own among them, is its parent's.
type clientCtx struct {
	context.Context
	c Client
}

func (x *clientCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return x
	}
	return x.Context.Value(key)
}

// FromContext is the Client Handler resolved for a request.
func FromContext(ctx context.Context) (Client, bool) {
	x, ok := ctx.Value(ctxKey{}).(*clientCtx)
	if !ok {
		return Client{}, false
	}
	return x.c, true
}

// Handler resolves each request's Client, keeps it in the context, and
// sets r.RemoteAddr to the sender's "ip:port" (port 0 when the proxy gave
// none), so per-client limits below count senders rather than a trusted
// proxy that carries them all.
func Handler(rv Resolver, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := rv.Resolve(r)
		ctx := &clientCtx{Context: r.Context(), c: c}
		if c.Peer != "" && c.Addr != r.RemoteAddr {
			r2 := r.WithContext(ctx)
			if _, _, err := net.SplitHostPort(c.Addr); err == nil {
				r2.RemoteAddr = c.Addr
			} else {
				r2.RemoteAddr = net.JoinHostPort(c.Addr, "0")
			}
			next.ServeHTTP(w, r2)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
