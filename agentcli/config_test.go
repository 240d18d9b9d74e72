package agentcli

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/relayhq/relay/apiclient"
)

func TestParseArgs(t *testing.T) {
	full := []string{"--server", "http://localhost:8080", "--token", "tok", "--endpoint", "ep-1", "--target", "127.0.0.1:3000"}
	route := func(id, target string) []Route { return []Route{{EndpointID: id, Target: target}} }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		want    Options
	}{
		{
			name: "flags",
			args: full,
			want: Options{Server: "http://localhost:8080", Token: "tok", Endpoints: route("ep-1", "127.0.0.1:3000"), Timeout: 30 * time.Second, HostHeader: HostRewrite},
		},
		{
			name: "environment",
			env:  map[string]string{"RELAY_SERVER": "https://relay.example", "RELAY_TOKEN": "t2", "RELAY_ENDPOINT": "ep-2", "RELAY_TARGET": "localhost:8000"},
			args: []string{"--timeout", "5s"},
			want: Options{Server: "https://relay.example", Token: "t2", Endpoints: route("ep-2", "localhost:8000"), Timeout: 5 * time.Second, HostHeader: HostRewrite},
		},
		{
			name: "flags win over environment",
			env:  map[string]string{"RELAY_SERVER": "https://relay.example", "RELAY_TOKEN": "t2", "RELAY_ENDPOINT": "ep-2", "RELAY_TARGET": "localhost:8000"},
			args: []string{"--target", "127.0.0.1:9"},
			want: Options{Server: "https://relay.example", Token: "t2", Endpoints: route("ep-2", "127.0.0.1:9"), Timeout: 30 * time.Second, HostHeader: HostRewrite},
		},
		{
			name: "several endpoints, own targets",
			args: []string{"--server", "http://x", "--token", "t", "--endpoint", "a=3000", "--endpoint", "b=https://localhost:8443/api", "--endpoint", "c", "--insecure"},
			want: Options{Server: "http://x", Token: "t", Timeout: 30 * time.Second, Insecure: true, HostHeader: HostRewrite,
				Endpoints: []Route{{EndpointID: "a", Target: "3000"}, {EndpointID: "b", Target: "https://localhost:8443/api"}, {EndpointID: "c"}}},
		},
		{
			name: "host header from the environment",
			env:  map[string]string{"RELAY_HOST_HEADER": "preserve"},
			args: full,
			want: Options{Server: "http://localhost:8080", Token: "tok", Endpoints: route("ep-1", "127.0.0.1:3000"), Timeout: 30 * time.Second, HostHeader: HostPreserve},
		},
		{name: "bad host header", args: append(full, "--host-header", "keep"), wantErr: "host header"},
		{name: "missing ca file", args: append(full, "--ca-file", "/nonexistent/ca.pem"), wantErr: "--ca-file"},
		{name: "ca file from the environment", args: full, env: map[string]string{"RELAY_CA_FILE": "/nonexistent/bundle.pem"}, wantErr: "--ca-file"},
		{name: "ca file without a certificate", args: append(full, "--ca-file", "config_test.go"), wantErr: "no PEM certificate"},
		{name: "nothing", args: nil, wantErr: "missing --server, --token, --endpoint"},
		{name: "no token", args: []string{"--server", "http://x", "--endpoint", "e", "--target", "127.0.0.1:1"}, wantErr: "missing --token"},
		{name: "remote target", args: replace(full, "127.0.0.1:3000", "10.0.0.1:3000"), wantErr: "--target"},
		{name: "target without port", args: replace(full, "127.0.0.1:3000", "127.0.0.1"), wantErr: "--target"},
		{name: "target port zero", args: replace(full, "127.0.0.1:3000", "127.0.0.1:0"), wantErr: "want a port"},
		{name: "target with foreign scheme", args: replace(full, "127.0.0.1:3000", "ftp://127.0.0.1:3000"), wantErr: "--target"},
		{name: "remote endpoint target", args: replace(full, "ep-1", "ep-1=example.com:80"), wantErr: "--endpoint"},
		{name: "endpoint twice", args: append(full, "--endpoint", "ep-1"), wantErr: "given twice"},
		{name: "server scheme", args: replace(full, "http://localhost:8080", "ftp://localhost"), wantErr: "scheme must be"},
		{name: "server without host", args: replace(full, "http://localhost:8080", "http://"), wantErr: "no host"},
		{name: "bad endpoint", args: replace(full, "ep-1", "Not An ID"), wantErr: "--endpoint"},
		{name: "bad timeout", args: append(full, "--timeout", "0s"), wantErr: "--timeout must be positive"},
		{name: "unknown flag", args: append(full, "--nope"), wantErr: "unknown flag"},
		{name: "stray argument", args: append(full, "extra"), wantErr: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			got, err := parseArgs(tt.args, io.Discard, env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("options = %+v, want %+v", got, tt.want)
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

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in      string
		want    Target
		wantErr string
	}{
		{"3000", Target{"http", "localhost:3000", ""}, ""},
		{"127.0.0.1:3000", Target{"http", "127.0.0.1:3000", ""}, ""},
		{"localhost:8080", Target{"http", "localhost:8080", ""}, ""},
		{"http://localhost:3000/api", Target{"http", "localhost:3000", "/api"}, ""},
		{"http://localhost:3000/api/", Target{"http", "localhost:3000", "/api"}, ""},
		{"http://localhost:3000/", Target{"http", "localhost:3000", ""}, ""},
		{"https://localhost:8443", Target{"https", "localhost:8443", ""}, ""},
		{"https://127.0.0.1", Target{"https", "127.0.0.1:443", ""}, ""},
		{"HTTP://localhost:3000/a%20b", Target{"http", "localhost:3000", "/a%20b"}, ""},
		{"localhost:3000/", Target{"http", "localhost:3000", ""}, ""},
		{"127.0.0.1:3000/hooks", Target{"http", "127.0.0.1:3000", "/hooks"}, ""},
		{"", Target{}, "empty"},
		{"abc", Target{}, `target "abc": want a port (3000), localhost:PORT, 127.0.0.1:PORT or a URL`},
		{"localhost:99999/", Target{}, `target "localhost:99999/": want a port`},
		{"0", Target{}, "target"},
		{"65536", Target{}, "target"},
		{"example.com:80", Target{}, "must be 127.0.0.1"},
		{"http://example.com:3000", Target{}, "must be 127.0.0.1"},
		{"http://10.0.0.1:3000", Target{}, "must be 127.0.0.1"},
		{"ftp://localhost:21", Target{}, "scheme must be"},
		{"http://localhost:3000/x?y=1", Target{}, "only scheme"},
		{"http://localhost:3000/#f", Target{}, "only scheme"},
		{"http://u:p@localhost:3000", Target{}, "only scheme"},
		{"localhost", Target{}, "must be 127.0.0.1"},
	}
	for _, tt := range tests {
		got, err := ParseTarget(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTarget(%q) = %+v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

// FuzzParseTarget: whatever the input, an accepted target is loopback,
// http or https, its prefix is a clean path, and it reads back the same.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"3000", "localhost:1", "http://localhost:3000/api", "https://127.0.0.1", "http://[::1]:80", "http://localhost:3000/%2F/", "x://y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTarget(s)
		if err != nil {
			return
		}
		if got.Scheme != "http" && got.Scheme != "https" {
			t.Fatalf("ParseTarget(%q) scheme %q", s, got.Scheme)
		}
		if !strings.HasPrefix(got.Host, "localhost:") && !strings.HasPrefix(got.Host, "127.0.0.1:") {
			t.Fatalf("ParseTarget(%q) host %q is not loopback", s, got.Host)
		}
		if got.Prefix != "" && (!strings.HasPrefix(got.Prefix, "/") || strings.HasSuffix(got.Prefix, "/") || strings.ContainsAny(got.Prefix, "?# \r\n")) {
			t.Fatalf("ParseTarget(%q) prefix %q", s, got.Prefix)
		}
		again, err := ParseTarget(got.String())
		if err != nil || again != got {
			t.Fatalf("ParseTarget(%q) = %+v reads back as %+v, %v", s, got, again, err)
		}
		if u, err := localURL(got, "/hook?x=1"); err != nil || u.RequestURI() != got.Prefix+"/hook?x=1" || u.Host != got.Host || u.Scheme != got.Scheme {
			t.Fatalf("localURL(%+v) = %v (request target %q), %v", got, u, u.RequestURI(), err)
		}
	})
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
		got, err := apiclient.WebSocketURL(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("WebSocketURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRunRejectsBadFlagsAtOnce(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(t.Context(), []string{"--server", "http://localhost:1", "--token", "t", "--endpoint", "e", "--target", "example.com:80"}, io.Discard, &stderr)
	var oe *OptionsError
	if !errors.As(err, &oe) || oe.ExitCode() != 2 || !strings.Contains(err.Error(), "--target") {
		t.Fatalf("Run = %v, want an *OptionsError about --target", err)
	}
	if err := Run(t.Context(), []string{"-h"}, io.Discard, &stderr); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("Run -h = %v, want pflag.ErrHelp", err)
	}
}
