package cmdutil

import "testing"

// TestNormalServer: --server takes a URL, or a host without a scheme (http
// on this machine, https elsewhere); anything else is a usage error that
// shows a URL to give.
func TestNormalServer(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"http://localhost:8080", "http://localhost:8080"},
		{"localhost:8080", "http://localhost:8080"},
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"[::1]:8080", "http://[::1]:8080"},
		{"relay.localhost", "http://relay.localhost"},
		{"relay.example.com", "https://relay.example.com"},
		{"relay.example.com:8443/base", "https://relay.example.com:8443/base"},
		{"https://relay.example.com", "https://relay.example.com"},
		{"http://localhost:8080/graphql", "http://localhost:8080"},
		{"http://localhost:8080/graphql/", "http://localhost:8080"},
		{"localhost:8080/graphql", "http://localhost:8080"},
		{"https://relay.example.com/base/graphql", "https://relay.example.com/base"},
		{"https://relay.example.com/", "https://relay.example.com"},
		{"https://relay.example.com/graphqlx", "https://relay.example.com/graphqlx"},
		{"ftp://relay.example.com", ""},
		{"http://", ""},
		{"::", ""},
	} {
		got, err := NormalServer(tt.in)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("NormalServer(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if err != nil && ExitCode(err) != ExitRefused {
			t.Errorf("NormalServer(%q): exit code %d, want %d", tt.in, ExitCode(err), ExitRefused)
		}
	}
}
