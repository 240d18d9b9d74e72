package main

import (
	"slices"
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
