package cmdutil

import (
	"strings"
	"testing"
)

func TestSmeeLocalhostNote(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"http://k3x9q2m7vd8a4hzp.localhost:8080/", `add the line "127.0.0.1 k3x9q2m7vd8a4hzp.localhost" to /etc/hosts`},
		{"http://t5tq.localhost:8080/smee/Vq43", `"127.0.0.1 t5tq.localhost"`},
		{"https://k3x9q2m7vd8a4hzp.relay.example.com/", ""},
		{"http://localhost:8080/", ""},
		{"http://evil-localhost.example/", ""},
	}
	for _, tt := range tests {
		got := SmeeLocalhostNote(tt.url)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("SmeeLocalhostNote(%q) = %q, want it to contain %q", tt.url, got, tt.want)
		}
	}
}
