package main

import (
	"runtime/debug"
	"slices"
	"testing"
)

// TestFormatVersion: release stamps win; without them the toolchain's
// module version and VCS revision are reported, a modified tree included.
func TestFormatVersion(t *testing.T) {
	vcs := func(version, rev, modified string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: version}}
		if rev != "" {
			info.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
		}
		return info
	}
	tests := []struct {
		name, version, commit, date string
		info                        *debug.BuildInfo
		want                        string
	}{
		{"release stamps", "0.3.0", "abc1234", "2026-11-23", vcs("(devel)", "ffffffffffffffffffff", "true"), "0.3.0 (commit abc1234, built 2026-11-23)"},
		{"plain build of a clean tree", "", "", "", vcs("v0.0.0-20261123101010-2fe08b5abcde", "2fe08b5abcdef0123456789", "false"), "v0.0.0-20261123101010-2fe08b5abcde (commit 2fe08b5abcde)"},
		{"plain build of a modified tree", "", "", "", vcs("(devel)", "2fe08b5abcdef0123456789", "true"), "devel (commit 2fe08b5abcde, modified)"},
		{"no VCS information", "", "", "", vcs("(devel)", "", ""), "devel (commit unknown)"},
		{"no build information", "", "", "", nil, "devel (commit unknown)"},
	}
	for _, tt := range tests {
		if got := formatVersion(tt.version, tt.commit, tt.date, tt.info); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestAgentDefaults: the stored server and token go in front of the
// agent's arguments only where flags and environment say nothing, and
// the token only to the server it was stored for.
func TestAgentDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)
	path, err := clientConfigPath()
	if err != nil {
		t.Fatal(err)
	}
	if err := saveClientConfig(path, clientConfig{Server: "http://stored:8080", Token: "stored-token"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"nothing given", []string{"--endpoint", "e"}, nil, []string{"--server", "http://stored:8080", "--token", "stored-token", "--endpoint", "e"}},
		{"server flag elsewhere: no stored token", []string{"-server=http://other"}, nil, []string{"-server=http://other"}},
		{"same server by flag keeps the token", []string{"--server", "http://stored:8080/"}, nil, []string{"--token", "stored-token", "--server", "http://stored:8080/"}},
		{"token in env", nil, map[string]string{"RELAY_TOKEN": "env"}, []string{"--server", "http://stored:8080"}},
		{"both in env", nil, map[string]string{"RELAY_TOKEN": "env", "RELAY_SERVER": "http://x"}, nil},
		{"token flag", []string{"--token", "t"}, nil, []string{"--server", "http://stored:8080", "--token", "t"}},
	}
	for _, tt := range tests {
		got, err := agentDefaults(tt.args, func(k string) string { return tt.env[k] })
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
