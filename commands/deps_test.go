package commands_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoStorageDependency holds commands to the read models' interfaces: it
// must not import the projections or, through them, the SQLite driver.
func TestNoStorageDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/relayhq/relay/projections", "modernc.org/sqlite"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("commands depends on %s", dep)
			}
		}
	}
}
