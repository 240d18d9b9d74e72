package version

import (
	"os"
	"regexp"
	"runtime/debug"
	"testing"
)

// TestFormatVersion: release stamps win; without them the toolchain's
// module version and VCS revision are reported, a modified tree included.
func TestFormatVersion(t *testing.T) {
	vcs := func(version, rev, modified string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Version: version}}
		if rev != "" {
			info.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
		}
		return info
	}
	tests := []struct {
		name, version, commit, date string
		info                        *debug.BuildInfo
		want                        string
	}{
		{"release stamps", "0.3.0", "abc1234", "2026-11-23", vcs("(devel)", "ffffffffffffffffffff", "true"), "0.3.0 (commit abc1234, built 2026-11-23)"},
		{"plain build of a clean tree", "", "", "", vcs("v0.0.0-20261123101010-2fe08b5abcde", "2fe08b5abcdef0123456789", "false"), "0.0.0-20261123101010-2fe08b5abcde (commit 2fe08b5abcde)"},
		{"go install of a tag", "", "", "", vcs("v0.3.0", "", ""), "0.3.0 (commit unknown)"},
		{"go install of a commit", "", "", "", vcs("v0.3.1-0.20261123101010-2fe08b5abcde", "", ""), "0.3.1-0.20261123101010-2fe08b5abcde (commit 2fe08b5abcde)"},
		{"plain build of a modified tree", "", "", "", vcs("(devel)", "2fe08b5abcdef0123456789", "true"), "devel (commit 2fe08b5abcde, modified)"},
		{"no VCS information", "", "", "", vcs("(devel)", "", ""), "devel (commit unknown)"},
		{"no build information", "", "", "", nil, "devel (commit unknown)"},
	}
	for _, tt := range tests {
		if got := formatVersion(tt.version, tt.commit, tt.date, tt.info); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestVersionAsInstallDocShows: what docs/install.md shows `relay --version`
// print is what a release build (scripts/lib/dist.sh's stamps) prints.
func TestVersionAsInstallDocShows(t *testing.T) {
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^relay --version +# (relay (\S+) \(commit (\w+), built ([0-9-]+)\))$`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/install.md shows no `relay --version  # relay VERSION (commit C, built D)` line")
	}
	if got := "relay " + formatVersion(string(m[2]), string(m[3]), string(m[4]), nil); got != string(m[1]) {
		t.Errorf("a release build prints %q; docs/install.md shows %q", got, m[1])
	}
}
