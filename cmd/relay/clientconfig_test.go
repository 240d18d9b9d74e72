package main

import (
	"slices"
	"strings"
	"testing"
)

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

// FuzzFlagValue: the agent's --server and --token are found in every Go
// flag spelling, whatever the value, and no argument list panics.
func FuzzFlagValue(f *testing.F) {
	f.Add("http://relay:8080", "--endpoint")
	f.Add("", "--")
	f.Add("-token=x", "=")
	f.Fuzz(func(t *testing.T, value, other string) {
		for _, args := range [][]string{
			{other, "--server", value},
			{"-server", value},
			{"--server=" + value, other},
			{"-server=" + value},
		} {
			if strings.HasPrefix(other, "-") {
				continue // another flag, or the end of flags
			}
			got, ok := flagValue(args, "server")
			if !ok || got != value {
				t.Fatalf("flagValue(%q) = %q, %v; want %q", args, got, ok, value)
			}
		}
		if got, ok := flagValue([]string{"--server", "first", "--server=" + value}, "server"); !ok || got != value {
			t.Fatalf("the last --server is %q, %v; want %q", got, ok, value)
		}
		_, _ = flagValue([]string{value, other, "-", "--", value}, other)
	})
}
