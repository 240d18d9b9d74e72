package replay

import (
	"errors"
	"strings"
	"testing"
)

// TestParseTarget: --to is a scheme, a host, a port and a path prefix;
// anything else is refused as input (exit 2).
func TestParseTarget(t *testing.T) {
	tests := []struct {
		in                 string
		host, addr, prefix string
		tls, bad           bool
	}{
		{in: "http://localhost:3000", host: "localhost:3000", addr: "localhost:3000"},
		{in: "http://localhost:3000/api/", host: "localhost:3000", addr: "localhost:3000", prefix: "/api"},
		{in: "https://staging.example.com", host: "staging.example.com", addr: "staging.example.com:443", tls: true},
		{in: "", bad: true},
		{in: "ftp://x", bad: true},
		{in: "http://", bad: true},
		{in: "http://u:p@localhost:3000", bad: true},
		{in: "http://localhost:3000/?q=1", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseTarget(tt.in)
		if tt.bad {
			var ie *InputError
			if !errors.As(err, &ie) || ie.ExitCode() != 2 {
				t.Errorf("ParseTarget(%q) = %+v, %v; want an input error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got.host != tt.host || got.addr != tt.addr || got.prefix != tt.prefix || got.tls != tt.tls {
			t.Errorf("ParseTarget(%q) = %+v, %v", tt.in, got, err)
		}
	}
}

// TestReplayRefusesAFolder: a folder given as the bundle is refused as
// input (exit 2) naming it, before anything is read or sent; it was read
// and failed with exit 1.
func TestReplayRefusesAFolder(t *testing.T) {
	dir := t.TempDir()
	err := Replayer{}.Run(t.Context(), dir, nil)
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), dir+" is a folder") {
		t.Errorf("Run(a folder) = %v, want an input error naming it", err)
	}
}
