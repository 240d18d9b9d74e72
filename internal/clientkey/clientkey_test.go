package clientkey

import (
	"net"
	"testing"
)

// TestOf: an IPv4 client is its address, an IPv6 client its /64 (every
// address of one /64 the same key), a mapped IPv4 address its IPv4 form;
// ports and zones never count.
func TestOf(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"192.0.2.7:4711", "192.0.2.7"},
		{"192.0.2.7", "192.0.2.7"},
		{"[2001:db8:1:2::1]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::9", "2001:db8:1:3::/64"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.7"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"pipe", "pipe"},
		{"not an address", "not an address"},
		{"", ""},
	} {
		if got := Of(tt.in); got != tt.want {
			t.Errorf("Of(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	a := &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::3e8"), Port: 9}
	b := &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 10}
	if OfAddr(a) != OfAddr(b) || OfAddr(a) != "2001:db8:1:2::/64" {
		t.Errorf("OfAddr: %q and %q, want both 2001:db8:1:2::/64", OfAddr(a), OfAddr(b))
	}
	if got := OfAddr(&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 1}); got != "127.0.0.1" {
		t.Errorf("OfAddr(127.0.0.1:1) = %q", got)
	}
}

// TestNetwork: a client key's network is its /24 (IPv4) or /48 (IPv6);
// a key that is no client address's has none.
func TestNetwork(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{Of("192.0.2.7:4711"), "192.0.2.0/24"},
		{Of("[2001:db8:1:2::1]:443"), "2001:db8:1::/48"},
		{Of("[2001:db8:1:ffff::9]:443"), "2001:db8:1::/48"},
		{Of("[::ffff:192.0.2.7]:80"), "192.0.2.0/24"},
		{"2001:db8:1:2::5", "2001:db8:1::/48"},
		{"2001:db8::/32", ""},
		{"account:01a2", ""},
		{"a1b2c3d4e5f6", ""},
		{"", ""},
	} {
		if got := Network(tt.in); got != tt.want {
			t.Errorf("Network(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestNetworkOfAnAddressAllocatesItsNameOnly: Network runs several times
// a request (in-flight caps, the body budget, rates), so a client's
// address costs the one string it returns, not a parse error besides.
func TestNetworkOfAnAddressAllocatesItsNameOnly(t *testing.T) {
	for _, key := range []string{"192.0.2.7", "2001:db8:1:2::/64"} {
		if n := testing.AllocsPerRun(100, func() { _ = Network(key) }); n > 1 {
			t.Errorf("Network(%q): %.0f allocations, want at most 1", key, n)
		}
	}
}

// TestCounter: a key takes up to its cap, a release makes room again, and
// a key that holds nothing is forgotten.
func TestCounter(t *testing.T) {
	var c Counter
	for i := range 3 {
		if !c.Take("a", 3) {
			t.Fatalf("take %d of 3 refused", i+1)
		}
	}
	if c.Take("a", 3) || !c.Take("b", 3) {
		t.Fatal("a fourth take of a admitted, or b's first refused")
	}
	c.Release("a")
	if c.Held("a") != 2 || !c.Take("a", 3) {
		t.Fatalf("after a release: a holds %d", c.Held("a"))
	}
	for range 3 {
		c.Release("a")
	}
	c.Release("b")
	if c.Clients() != 0 {
		t.Fatalf("%d clients left holding nothing", c.Clients())
	}
}

// TestCaps: a client takes up to its cap, its network up to its own over
// all its clients (the client's cap named first), another network takes
// on its own, a key of no network has only its client cap, and a release
// gives back both counts.
func TestCaps(t *testing.T) {
	var c Caps
	for _, key := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.2"} {
		if full := c.Take(key, 2, 3); full != NotFull {
			t.Fatalf("take of %s: %v", key, full)
		}
	}
	if full := c.Take("192.0.2.1", 2, 3); full != ClientFull {
		t.Fatalf("a client at its cap: %v, want ClientFull", full)
	}
	if full := c.Take("192.0.2.3", 2, 3); full != NetworkFull {
		t.Fatalf("a new client of a network at its cap: %v, want NetworkFull", full)
	}
	if full := c.Take("192.0.3.1", 2, 3); full != NotFull {
		t.Fatalf("another network: %v", full)
	}
	for range 3 {
		if full := c.Take("account:a", 3, 1); full != NotFull {
			t.Fatalf("a key of no network under its client cap: %v", full)
		}
	}
	if c.NetworkHeld("192.0.2.0/24") != 3 || c.Held("192.0.2.3") != 0 {
		t.Fatalf("the /24 holds %d, 192.0.2.3 %d; want 3 and 0", c.NetworkHeld("192.0.2.0/24"), c.Held("192.0.2.3"))
	}
	c.Release("192.0.2.2")
	if full := c.Take("192.0.2.3", 2, 3); full != NotFull {
		t.Fatalf("after a release in the network: %v", full)
	}
	for _, key := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.3", "192.0.3.1", "account:a", "account:a", "account:a"} {
		c.Release(key)
	}
	if c.Clients() != 0 || c.NetworkHeld("192.0.2.0/24") != 0 {
		t.Fatalf("%d clients and %d in the /24 left holding nothing", c.Clients(), c.NetworkHeld("192.0.2.0/24"))
	}
}
