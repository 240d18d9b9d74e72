package ingress

import (
	"net"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestParseHost(t *testing.T) {
	tests := []struct {
		name, host, domain string
		address            string
		bare, ok           bool
	}{
		{name: "address", host: "abc.localhost", domain: "localhost", address: "abc", ok: true},
		{name: "address with port", host: "abc.localhost:8080", domain: "localhost", address: "abc", ok: true},
		{name: "upper case", host: "ABC.LocalHost:8080", domain: "localhost", address: "abc", ok: true},
		{name: "upper case domain", host: "abc.relay.example", domain: "Relay.Example", address: "abc", ok: true},
		{name: "trailing dot", host: "abc.localhost.", domain: "localhost", address: "abc", ok: true},
		{name: "trailing dot and port", host: "abc.localhost.:80", domain: "localhost", address: "abc", ok: true},
		{name: "hyphen inside", host: "a-b-1.localhost", domain: "localhost", address: "a-b-1", ok: true},
		{name: "multi-label domain", host: "x1.relay.example.com:443", domain: "relay.example.com", address: "x1", ok: true},
		{name: "empty port", host: "abc.localhost:", domain: "localhost", address: "abc", ok: true},
		{name: "bare", host: "localhost", domain: "localhost", bare: true, ok: true},
		{name: "bare with port", host: "localhost:8080", domain: "localhost", bare: true, ok: true},
		{name: "bare upper case", host: "LOCALHOST", domain: "localhost", bare: true, ok: true},
		{name: "empty", host: "", domain: "localhost"},
		{name: "only port", host: ":8080", domain: "localhost"},
		{name: "empty domain", host: "abc.localhost", domain: ""},
		{name: "other domain", host: "abc.example.com", domain: "localhost"},
		{name: "suffix without dot", host: "abclocalhost", domain: "localhost"},
		{name: "nested labels", host: "a.b.localhost", domain: "localhost"},
		{name: "empty label", host: ".localhost", domain: "localhost"},
		{name: "leading hyphen", host: "-abc.localhost", domain: "localhost"},
		{name: "trailing hyphen", host: "abc-.localhost", domain: "localhost"},
		{name: "underscore", host: "a_b.localhost", domain: "localhost"},
		{name: "label too long", host: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.localhost", domain: "localhost"},
		{name: "ipv4 is the bare domain", host: "127.0.0.1:8080", domain: "localhost", bare: true, ok: true},
		{name: "ipv4 as domain label", host: "1.localhost", domain: "localhost", address: "1", ok: true},
		{name: "ipv6 is the bare domain", host: "[::1]:8080", domain: "localhost", bare: true, ok: true},
		{name: "ipv6 unbracketed", host: "::1", domain: "localhost", bare: true, ok: true},
		{name: "bracket without ip", host: "[abc]:80", domain: "localhost"},
		{name: "bad port", host: "abc.localhost:80a", domain: "localhost"},
		{name: "two ports", host: "abc.localhost:80:90", domain: "localhost"},
		{name: "non-ascii label", host: "ä.localhost", domain: "localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			address, bare, ok := ParseHost(tt.host, tt.domain)
			if address != tt.address || bare != tt.bare || ok != tt.ok {
				t.Errorf("ParseHost(%q, %q) = %q, %v, %v; want %q, %v, %v",
					tt.host, tt.domain, address, bare, ok, tt.address, tt.bare, tt.ok)
			}
		})
	}
}

func FuzzParseHost(f *testing.F) {
	seeds := []struct{ host, domain string }{
		{"abc.localhost:8080", "localhost"},
		{"localhost", "localhost"},
		{"ABC.LOCALHOST.", "localhost"},
		{"a.b.localhost", "localhost"},
		{"[::1]:80", "localhost"},
		{"x.relay.example.com", "relay.example.com"},
		{"", ""},
		{":", "."},
		{"-.localhost", "localhost"},
	}
	for _, s := range seeds {
		f.Add(s.host, s.domain)
	}
	f.Fuzz(func(t *testing.T, host, domainName string) {
		address, bare, ok := ParseHost(host, domainName)
		switch {
		case !ok && (address != "" || bare):
			t.Fatalf("ParseHost(%q, %q) = %q, %v, false: a refusal must be empty", host, domainName, address, bare)
		case bare && address != "":
			t.Fatalf("ParseHost(%q, %q) = %q, bare: the bare domain has no address", host, domainName, address)
		case ok && !bare && domain.ValidateAddressID(address) != nil:
			t.Fatalf("ParseHost(%q, %q) = %q: not a valid address id", host, domainName, address)
		}
		// Case never matters: the ASCII upper-cased host names the same thing.
		a2, b2, ok2 := ParseHost(asciiUpper(host), domainName)
		if a2 != address || b2 != bare || ok2 != ok {
			t.Fatalf("ParseHost(%q) = %q, %v, %v but upper-cased = %q, %v, %v", host, address, bare, ok, a2, b2, ok2)
		}
		// An accepted address round-trips through its canonical host name.
		if ok && !bare {
			a3, b3, ok3 := ParseHost(address+"."+domainName, domainName)
			if a3 != address || b3 || !ok3 {
				t.Fatalf("round trip of %q under %q gave %q, %v, %v", address, domainName, a3, b3, ok3)
			}
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// TestIsIPHostAsNetParseIP: isIPHost, which allocates nothing, tells IP
// literals exactly as net.SplitHostPort and net.ParseIP did.
func TestIsIPHostAsNetParseIP(t *testing.T) {
	old := func(host string) bool {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		return net.ParseIP(strings.Trim(host, "[]")) != nil
	}
	for _, host := range []string{"", "1.2.3.4", "1.2.3.4:80", "1.2.3.4:", "01.2.3.4", "1.2.3", "256.1.1.1", "[::1]", "[::1]:8080", "::1",
		"::ffff:1.2.3.4", "[::ffff:1.2.3.4]:1", "fe80::1%eth0", "[fe80::1%eth0]:80", "abc.localhost", "abc.localhost:8080",
		"localhost", ":80", "[", "]", "[1.2.3.4]", "1.2.3.4.", "a:b:c", "[::1]x", "1.2.3.4%x"} {
		if got, want := isIPHost(host), old(host); got != want {
			t.Errorf("isIPHost(%q) = %v, want %v", host, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { isIPHost("abc.localhost:8080"); isIPHost("abc.localhost") }); n != 0 {
		t.Errorf("isIPHost allocates %v times, want none", n)
	}
}
