package cmdutil

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/relayhq/relay/clientconfig"
)

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

// TestResolveSaysWhereItFound: Resolve records where the server and the
// token came from (relay whoami prints it): a flag, the environment, the
// stored login (its file's path) or, for the server, the default; a stored
// token of another server is not used and names no source.
func TestResolveSaysWhereItFound(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	path, err := clientconfig.Path()
	if err != nil {
		t.Fatal(err)
	}
	const stored = "http://localhost:9090"
	for _, tt := range []struct {
		name               string
		stored             clientconfig.Config
		args               []string
		env                map[string]string
		server, serverFrom string
		token, tokenFrom   string
	}{
		{"nothing", clientconfig.Config{}, nil, nil, DefaultServer, "default", "", ""},
		{"the stored login", clientconfig.Config{Server: stored, Token: "rly_s"}, nil, nil, stored, path, "rly_s", path},
		{"flags", clientconfig.Config{Server: stored, Token: "rly_s"}, []string{"--server", "http://127.0.0.1:1", "--token", "rly_f"}, nil, "http://127.0.0.1:1", "--server", "rly_f", "--token"},
		{"environment", clientconfig.Config{Server: stored, Token: "rly_s"}, nil, map[string]string{"RELAY_SERVER": "http://127.0.0.1:2", "RELAY_TOKEN": "rly_e"}, "http://127.0.0.1:2", "RELAY_SERVER", "rly_e", "RELAY_TOKEN"},
		{"flag over environment", clientconfig.Config{}, []string{"--token", "rly_f"}, map[string]string{"RELAY_TOKEN": "rly_e"}, DefaultServer, "default", "rly_f", "--token"},
		{"--server of the stored login", clientconfig.Config{Server: stored, Token: "rly_s"}, []string{"--server", "http://127.0.0.1:9090"}, nil, "http://127.0.0.1:9090", "--server", "rly_s", path},
		{"RELAY_TOKEN over the stored login", clientconfig.Config{Server: stored, Token: "rly_s"}, nil, map[string]string{"RELAY_TOKEN": "rly_e"}, stored, path, "rly_e", "RELAY_TOKEN"},
		{"another server than the stored login's", clientconfig.Config{Server: stored, Token: "rly_s"}, nil, map[string]string{"RELAY_SERVER": "http://127.0.0.1:3"}, "http://127.0.0.1:3", "RELAY_SERVER", "", ""},
	} {
		if err := clientconfig.Save(path, tt.stored); err != nil {
			t.Fatal(err)
		}
		var c Connection
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		c.Flags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := c.Resolve(fs, func(k string) string { return tt.env[k] }); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if c.Server != tt.server || c.ServerFrom != tt.serverFrom || c.Token != tt.token || c.TokenFrom != tt.tokenFrom {
			t.Errorf("%s: server %q from %q, token %q from %q; want %q from %q, %q from %q", tt.name,
				c.Server, c.ServerFrom, c.Token, c.TokenFrom, tt.server, tt.serverFrom, tt.token, tt.tokenFrom)
		}
	}
}

// TestLoadTLSBoundsTheCAFile: every client command's --ca-file (or
// RELAY_CA_FILE) over agentcli.MaxCAFile is a usage error naming the file
// and the bound, the file not read past the bound. It was read whole.
func TestLoadTLSBoundsTheCAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bundle.pem")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: no room on disk
		t.Fatal(err)
	}
	f.Close()
	c := Connection{CAFile: path}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = c.LoadTLS()
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "--ca-file "+path) || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Errorf("LoadTLS = %v, want --ca-file %s refused as over 1 MiB", err, path)
	}
	if ExitCode(err) != ExitRefused {
		t.Errorf("exit code %d, want %d", ExitCode(err), ExitRefused)
	}
	// Reading the file whole allocated 67.6 MiB; -race doubles what
	// reading to the bound allocates (4.3 MiB).
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("refusing a 64 MiB file allocated %.1f MiB, want at most 16", float64(n)/(1<<20))
	}
}
