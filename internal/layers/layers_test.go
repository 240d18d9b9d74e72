package layers_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/relayhq/relay"

// TestDependenciesPointInward runs `go list -deps` on each package and
// fails naming any dependency its layer must not have.
func TestDependenciesPointInward(t *testing.T) {
	storage := []string{module + "/projections", "modernc.org/sqlite"}
	bus := []string{module + "/tunnel/nodebus", "github.com/nats-io", "github.com/ThreeDotsLabs/watermill"}
	commandLine := []string{module + "/cli", "github.com/spf13/cobra"}
	tests := []struct {
		pkg    string
		banned func(dep string) bool
		why    string
	}{
		{
			pkg: "domain",
			// Only the standard library (no dot in the first element) and
			// the domain itself.
			banned: func(dep string) bool {
				return strings.Contains(strings.Split(dep, "/")[0], ".") && !strings.HasPrefix(dep, module+"/domain")
			},
			why: "the core is pure: no framework or driver",
		},
		{pkg: "commands", banned: within(storage), why: "the application layer reads through its own interfaces"},
		{pkg: "graph", banned: within(storage), why: "the API reads through its own interfaces"},
		// The bus between nodes lives in tunnel/nodebus: the API and a
		// single node's tunnel build without NATS or Watermill.
		{pkg: "graph", banned: within(bus), why: "only the node bus (tunnel/nodebus) speaks NATS"},
		{pkg: "tunnel", banned: within(bus), why: "only the node bus (tunnel/nodebus) speaks NATS"},
		// The export formats and offline replay are libraries the
		// commands in cli/ use, not the other way round.
		{pkg: "har", banned: within(commandLine), why: "a format knows no command line"},
		{pkg: "bundle", banned: within(commandLine), why: "a format knows no command line"},
		{pkg: "replay", banned: within(commandLine), why: "offline replay knows no command line"},
		{pkg: "curl", banned: within(commandLine), why: "the curl command knows no command line of ours"},
		{pkg: "deliveryjson", banned: within(commandLine), why: "the API's shapes know no command line"},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", module+"/"+tt.pkg).Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", tt.pkg, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if tt.banned(dep) {
					t.Errorf("%s depends on %s (%s)", tt.pkg, dep, tt.why)
				}
			}
		})
	}
}

// within reports whether a dependency is one of roots or below one.
func within(roots []string) func(string) bool {
	return func(dep string) bool {
		for _, r := range roots {
			if dep == r || strings.HasPrefix(dep, r+"/") {
				return true
			}
		}
		return false
	}
}
