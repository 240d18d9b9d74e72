package forwarded

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Element is one forwarded-element of a Forwarded header (RFC 7239 §4):
// what one proxy tells about the request it received. Unquoted values;
// empty when the element has no such parameter.
type Element struct {
	For, By, Host, Proto string
}

// maxElements bounds how many elements (and X-Forwarded-For entries) are
// read: a header full of commas must not cost more than the header limit
// already allows, and no real chain of proxies is longer.
const maxElements = 64

var errSyntax = errors.New("malformed Forwarded header")

// Parse reads the elements of Forwarded header values in order, the
// nearest proxy's last. Unknown parameters are skipped; a value that does
// not follow the grammar is an error (the header is then ignored whole:
// a proxy never writes one, a sender may).
func Parse(values []string) ([]Element, error) {
	var out []Element
	for _, v := range values {
		p := parser{s: v}
		for {
			p.space()
			if p.done() {
				break
			}
			if p.peek() == ',' { // empty list elements are allowed (RFC 9110 §5.6.1)
				p.i++
				continue
			}
			e, err := p.element()
			if err != nil {
				return nil, err
			}
			if len(out) == maxElements {
				return nil, fmt.Errorf("%w: more than %d elements", errSyntax, maxElements)
			}
			out = append(out, e)
			p.space()
			if p.done() {
				break
			}
			if p.peek() != ',' {
				return nil, fmt.Errorf("%w: %q after an element", errSyntax, p.peek())
			}
			p.i++
		}
	}
	return out, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) done() bool { return p.i >= len(p.s) }
func (p *parser) peek() byte { return p.s[p.i] }

func (p *parser) space() {
	for !p.done() && (p.peek() == ' ' || p.peek() == '\t') {
		p.i++
	}
}

// element reads pairs separated by ';' up to a ',' or the end.
func (p *parser) element() (Element, error) {
	var e Element
	for {
		p.space()
		name := p.token()
		if name == "" || p.done() || p.peek() != '=' {
			return e, fmt.Errorf("%w: expected name=value at %d", errSyntax, p.i)
		}
		p.i++
		value, err := p.value()
		if err != nil {
			return e, err
		}
		switch strings.ToLower(name) {
		case "for":
			e.For = value
		case "by":
			e.By = value
		case "host":
			e.Host = value
		case "proto":
			e.Proto = strings.ToLower(value)
		}
		p.space()
		if p.done() || p.peek() == ',' {
			return e, nil
		}
		if p.peek() != ';' {
			return e, fmt.Errorf("%w: %q after a pair", errSyntax, p.peek())
		}
		p.i++
	}
}

func (p *parser) token() string {
	start := p.i
	for !p.done() && isTokenChar(p.peek()) {
		p.i++
	}
	return p.s[start:p.i]
}

// value is a token or a quoted-string (RFC 9110 §5.6.4).
func (p *parser) value() (string, error) {
	if p.done() || p.peek() != '"' {
		v := p.token()
		if v == "" {
			return "", fmt.Errorf("%w: empty value at %d", errSyntax, p.i)
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.peek()
		p.i++
		switch {
		case c == '"':
			return b.String(), nil
		case c == '\\':
			if p.done() {
				return "", fmt.Errorf("%w: unterminated escape", errSyntax)
			}
			if e := p.peek(); e < 0x20 && e != '\t' || e == 0x7f {
				return "", fmt.Errorf("%w: control character in a quoted value", errSyntax)
			}
			b.WriteByte(p.peek())
			p.i++
		case c < 0x20 && c != '\t' || c == 0x7f:
			return "", fmt.Errorf("%w: control character in a quoted value", errSyntax)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("%w: unterminated quoted value", errSyntax)
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// String formats e as a forwarded-element, quoting values that need it
// (IPv6 nodes, ports).
func (e Element) String() string {
	var b strings.Builder
	// Sized for the usual element, none quoted, so it is built in one
	// allocation: the agent writes one per forward.
	b.Grow(len("for=;by=;host=;proto=") + len(e.For) + len(e.By) + len(e.Host) + len(e.Proto) + 8)
	for _, p := range [...]struct{ name, v string }{{"for", e.For}, {"by", e.By}, {"host", e.Host}, {"proto", e.Proto}} {
		if p.v == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(';')
		}
		b.WriteString(p.name)
		b.WriteByte('=')
		writeQuotedIfNeeded(&b, p.v)
	}
	return b.String()
}

// writeQuotedIfNeeded writes v as it is when it is a token, else as an
// HTTP quoted-string: '"' and '\\' escaped, other bytes as they are.
func writeQuotedIfNeeded(b *strings.Builder, v string) {
	token := true
	for i := 0; i < len(v) && token; i++ {
		token = isTokenChar(v[i])
	}
	if token {
		b.WriteString(v)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
}

// Node formats an address as a Forwarded node (RFC 7239 §6): IPv6 in
// brackets, an optional port after a colon; the caller's String quotes it.
func Node(addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		ip := ap.Addr().Unmap()
		if ip.Is6() {
			return "[" + ip.String() + "]"
		}
		return ip.String()
	}
	if ip, err := netip.ParseAddr(strings.Trim(addr, "[]")); err == nil {
		ip = ip.Unmap()
		if ip.Is6() {
			return "[" + ip.String() + "]"
		}
		return ip.String()
	}
	return "unknown"
}

// NodeAddr reads the IP of a node: "192.0.2.1", "192.0.2.1:80",
// "[2001:db8::1]", "[2001:db8::1]:80", or a bare IPv6 address as
// X-Forwarded-For carries it. "unknown" and obfuscated identifiers
// ("_hidden") are not addresses.
func NodeAddr(node string) (ip netip.Addr, port string, ok bool) {
	node = strings.TrimSpace(node)
	if ap, err := netip.ParseAddrPort(node); err == nil {
		return ap.Addr().Unmap(), strconv.Itoa(int(ap.Port())), true
	}
	if strings.HasPrefix(node, "[") {
		host, rest, found := strings.Cut(node[1:], "]")
		if !found {
			return netip.Addr{}, "", false
		}
		ip, err := netip.ParseAddr(host)
		if err != nil || (rest != "" && !strings.HasPrefix(rest, ":")) {
			return netip.Addr{}, "", false
		}
		return ip.Unmap(), strings.TrimPrefix(rest, ":"), true
	}
	ip, err := netip.ParseAddr(node)
	if err != nil {
		return netip.Addr{}, "", false
	}
	return ip.Unmap(), "", true
}

// List splits comma-separated header values (X-Forwarded-For,
// X-Forwarded-Proto) into trimmed entries in order, at most maxElements
// (the nearest proxy's last ones are kept).
func List(values []string) []string {
	var out []string
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	if len(out) > maxElements {
		out = out[len(out)-maxElements:]
	}
	return out
}
