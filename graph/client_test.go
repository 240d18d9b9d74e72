package graph

import "testing"

func TestClientAddress(t *testing.T) {
	tests := []struct{ remote, want string }{
		{"127.0.0.1:5000", "127.0.0.1"},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"},
		{"not an address", "not an address"},
	}
	for _, tt := range tests {
		if got := clientAddress(tt.remote); got != tt.want {
			t.Errorf("clientAddress(%q) = %q, want %q", tt.remote, got, tt.want)
		}
	}
}
