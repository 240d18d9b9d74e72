package desktop

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestRelayStaysFreeOfTheDesktop: `relay` imports nothing of the desktop
// agent or its toolkit, so it stays a static pure-Go binary.
func TestRelayStaysFreeOfTheDesktop(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/relay")
	cmd.Dir = harness.ModuleRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/relayhq/relay/desktop", "github.com/wailsapp/", "github.com/zalando/go-keyring", "github.com/godbus/", "fyne.io/systray"} {
			if strings.HasPrefix(pkg, bad) {
				t.Errorf("relay imports %s", pkg)
			}
		}
	}
}
