package jetstream

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		in      string
		servers string
		opts    Options
		ok      bool
	}{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222", Options{}, true},
		{"nats://a:4222,nats://b:4222,tls://c:4222", "nats://a:4222,nats://b:4222,tls://c:4222", Options{}, true},
		{"nats://u:p@a:4222?replicas=3&stream=EVENTS&subject=prod.events", "nats://u:p@a:4222", Options{Stream: "EVENTS", Subject: "prod.events", Replicas: 3}, true},
		{"nats://a", "nats://a", Options{}, true},
		{"", "", Options{}, false},
		{"esdb://a:2113", "", Options{}, false},
		{"nats://a:4222,", "", Options{}, false},
		{"nats://a:4222,http://b", "", Options{}, false},
		{"nats://:4222", "", Options{}, false},
		{"nats://a:99999", "", Options{}, false},
		{"nats://a:4222/path", "", Options{}, false},
		{"nats://a?replicas=0", "", Options{}, false},
		{"nats://a?replicas=6", "", Options{}, false},
		{"nats://a?replicas=x", "", Options{}, false},
		{"nats://a?stream=a.b", "", Options{}, false},
		{"nats://a?subject=a.*", "", Options{}, false},
		{"nats://a?subject=a..b", "", Options{}, false},
		{"nats://a?stream=A&stream=B", "", Options{}, false},
		{"nats://a?tls=false", "", Options{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			servers, opts, err := ParseURL(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseURL(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if tt.ok && (servers != tt.servers || opts.Stream != tt.opts.Stream || opts.Subject != tt.opts.Subject || opts.Replicas != tt.opts.Replicas) {
				t.Fatalf("ParseURL(%q) = %q, %+v; want %q, %+v", tt.in, servers, opts, tt.servers, tt.opts)
			}
		})
	}
}

// FuzzParseURL: the parser never fails with the password of a URL's user
// in its message, and what it accepts is a list of nats or tls URLs.
func FuzzParseURL(f *testing.F) {
	f.Add("a:4222,nats://b:4222?replicas=3")
	f.Add("a:4222/x?stream=S")
	f.Add("a:4222?subject=a.*")
	f.Add("[::1:4222")
	f.Fuzz(func(t *testing.T, rest string) {
		const password = "s3cret"
		if strings.Contains(rest, password) {
			return
		}
		servers, _, err := ParseURL("nats://user:" + password + "@" + rest)
		if err != nil {
			if strings.Contains(err.Error(), password) {
				t.Fatalf("error repeats the password: %v", err)
			}
			return
		}
		for _, seed := range strings.Split(servers, ",") {
			if !IsURL(seed) {
				t.Fatalf("accepted seed %q", seed)
			}
		}
	})
}
