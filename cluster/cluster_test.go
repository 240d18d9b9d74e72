package cluster

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseServers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // URLs; 0: refused
	}{
		{"nats://127.0.0.1:4222", 1},
		{"nats://a:4222,nats://b:4222,tls://u:p@c:4222", 3},
		{"", 0},
		{"http://a:4222", 0},
		{"nats://a:4222,", 0},
		{"nats://a:4222?replicas=3", 0},
		{"nats://", 0},
	} {
		got, err := ParseServers(tc.in)
		if tc.want == 0 {
			if err == nil {
				t.Errorf("ParseServers(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || len(got) != tc.want {
			t.Errorf("ParseServers(%q) = %v, %v; want %d URLs", tc.in, got, err, tc.want)
		}
	}
}

func TestNodeIDIsKeptInTheDataFolder(t *testing.T) {
	dir := t.TempDir()
	first, err := NodeID(dir, "")
	if err != nil || ValidNodeID(first) != nil {
		t.Fatalf("generated %q, %v", first, err)
	}
	again, err := NodeID(dir, "")
	if err != nil || again != first {
		t.Fatalf("second start named %q (%v), want %q", again, err, first)
	}
	if given, err := NodeID(dir, "relay-b"); err != nil || given != "relay-b" {
		t.Fatalf("given name: %q, %v", given, err)
	}
	for _, bad := range []string{"a.b", "a b", "*", ">", string(make([]byte, 65))} {
		if _, err := NodeID(dir, bad); err == nil {
			t.Errorf("node id %q accepted", bad)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, nodeIDFile), []byte("bad.name\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeID(dir, ""); err == nil {
		t.Error("a damaged node-id file was accepted")
	}
}
