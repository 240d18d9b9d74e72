package agentcli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	full := []string{"--server", "http://localhost:8080", "--token", "tok", "--endpoint", "ep-1", "--target", "127.0.0.1:3000"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		want    config
	}{
		{
			name: "flags",
			args: full,
			want: config{server: "http://localhost:8080", wsURL: "ws://localhost:8080/graphql", token: "tok", endpoint: "ep-1", target: "127.0.0.1:3000", timeout: 30 * time.Second, hostHeader: hostRewrite},
		},
		{
			name: "environment",
			env:  map[string]string{"RELAY_SERVER": "https://relay.example", "RELAY_TOKEN": "t2", "RELAY_ENDPOINT": "ep-2", "RELAY_TARGET": "localhost:8000"},
			args: []string{"--timeout", "5s"},
			want: config{server: "https://relay.example", wsURL: "wss://relay.example/graphql", token: "t2", endpoint: "ep-2", target: "localhost:8000", timeout: 5 * time.Second, hostHeader: hostRewrite},
		},
		{
			name: "flags win over environment",
			env:  map[string]string{"RELAY_SERVER": "https://relay.example", "RELAY_TOKEN": "t2", "RELAY_ENDPOINT": "ep-2", "RELAY_TARGET": "localhost:8000"},
			args: []string{"--target", "127.0.0.1:9"},
			want: config{server: "https://relay.example", wsURL: "wss://relay.example/graphql", token: "t2", endpoint: "ep-2", target: "127.0.0.1:9", timeout: 30 * time.Second, hostHeader: hostRewrite},
		},
		{
			name: "host header from the environment",
			env:  map[string]string{"RELAY_HOST_HEADER": "preserve"},
			args: full,
			want: config{server: "http://localhost:8080", wsURL: "ws://localhost:8080/graphql", token: "tok", endpoint: "ep-1", target: "127.0.0.1:3000", timeout: 30 * time.Second, hostHeader: hostPreserve},
		},
		{name: "bad host header", args: append(full, "--host-header", "keep"), wantErr: "--host-header"},
		{name: "missing ca file", args: append(full, "--ca-file", "/nonexistent/ca.pem"), wantErr: "--ca-file"},
		{name: "ca file from SSL_CERT_FILE", args: full, env: map[string]string{"SSL_CERT_FILE": "/nonexistent/bundle.pem"}, wantErr: "--ca-file"},
		{name: "ca file without a certificate", args: append(full, "--ca-file", "config_test.go"), wantErr: "no PEM certificate"},
		{name: "nothing", args: nil, wantErr: "missing --server, --token, --endpoint, --target"},
		{name: "no token", args: []string{"--server", "http://x", "--endpoint", "e", "--target", "127.0.0.1:1"}, wantErr: "missing --token"},
		{name: "remote target", args: replace(full, "127.0.0.1:3000", "10.0.0.1:3000"), wantErr: "--target"},
		{name: "target without port", args: replace(full, "127.0.0.1:3000", "127.0.0.1"), wantErr: "--target"},
		{name: "target port zero", args: replace(full, "127.0.0.1:3000", "127.0.0.1:0"), wantErr: "port must be"},
		{name: "target with scheme", args: replace(full, "127.0.0.1:3000", "http://127.0.0.1:3000"), wantErr: "--target"},
		{name: "server scheme", args: replace(full, "http://localhost:8080", "ftp://localhost"), wantErr: "scheme must be"},
		{name: "server without host", args: replace(full, "http://localhost:8080", "http://"), wantErr: "no host"},
		{name: "bad endpoint", args: replace(full, "ep-1", "Not An ID"), wantErr: "--endpoint"},
		{name: "bad timeout", args: append(full, "--timeout", "0s"), wantErr: "--timeout must be positive"},
		{name: "unknown flag", args: append(full, "--nope"), wantErr: "flag provided but not defined"},
		{name: "stray argument", args: append(full, "extra"), wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			got, err := parseConfig(tt.args, io.Discard, env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got != tt.want {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func replace(args []string, old, new string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == old {
			out[i] = new
		}
	}
	return out
}

func TestWebsocketURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://localhost:8080", "ws://localhost:8080/graphql"},
		{"http://localhost:8080/", "ws://localhost:8080/graphql"},
		{"https://relay.example", "wss://relay.example/graphql"},
		{"ws://127.0.0.1:9/graphql", "ws://127.0.0.1:9/graphql"},
		{"https://relay.example/base/", "wss://relay.example/base/graphql"},
	}
	for _, tt := range tests {
		got, err := websocketURL(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("websocketURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRunRejectsBadFlagsAtOnce(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(t.Context(), []string{"--server", "http://localhost:1", "--token", "t", "--endpoint", "e", "--target", "example.com:80"}, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--target") {
		t.Fatalf("Run = %v, want a --target error", err)
	}
	if err := Run(t.Context(), []string{"-h"}, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("Run -h = %v, want flag.ErrHelp", err)
	}
}
