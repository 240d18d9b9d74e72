// Package version is what `relay --version` and `relay version` print:
// the release stamps, else what the Go toolchain recorded in the binary.
package version

import (
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/relayhq/relay/cli/cmdutil"
)

// Set at release with -ldflags "-X github.com/relayhq/relay/cli/version.version=…"
// and .commit, .date alike (scripts/lib/dist.sh). Empty in a plain go build,
// which falls back to what the Go toolchain recorded in the binary.
var (
	version string
	commit  string
	date    string
)

// Text is what `relay --version` prints after the program's name,
// e.g. "0.3.0 (commit abc1234, built 2026-11-23)". Without release stamps
// it reports the module version and VCS revision the toolchain embedded,
// so a build from a modified tree says so.
func Text() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(version, commit, date, info)
}

// Stamps is `relay version -o json`: the version, the commit ("unknown"
// when none is known; ", modified" when built from a changed tree) and
// the build date (null without release stamps).
type Stamps struct {
	Version string  `json:"version"`
	Commit  string  `json:"commit"`
	Date    *string `json:"date"`
}

// pseudoVersion matches a Go pseudo-version's commit: its last 12 hex digits.
var pseudoVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+-(?:[0-9A-Za-z.]+\.)?[0-9]{14}-([0-9a-f]{12})(?:\+incompatible)?$`)

// resolve is what formatVersion prints, in parts.
func resolve(version, commit, date string, info *debug.BuildInfo) Stamps {
	var revision, modified string
	if info != nil {
		if version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			// `go install …@v0.3.0` records "v0.3.0": printed as a release
			// prints it (0.3.0), as docs/install.md shows. A pseudo-version
			// (v0.0.0-20261123101010-2fe08b5abcde) names its commit last,
			// which such a build has no other record of.
			version = strings.TrimPrefix(info.Main.Version, "v")
			if m := pseudoVersion.FindStringSubmatch(version); m != nil {
				revision = m[1]
			}
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && revision != "" {
				continue // the pseudo-version's, the same commit
			}
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if version == "" {
		version = "devel"
	}
	if commit == "" {
		commit = revision
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if commit != "" && modified == "true" {
			commit += ", modified"
		}
	}
	if commit == "" {
		commit = "unknown"
	}
	st := Stamps{Version: version, Commit: commit}
	if date != "" {
		st.Date = &date
	}
	return st
}

func formatVersion(version, commit, date string, info *debug.BuildInfo) string {
	st := resolve(version, commit, date, info)
	if st.Date == nil {
		return fmt.Sprintf("%s (commit %s)", st.Version, st.Commit)
	}
	return fmt.Sprintf("%s (commit %s, built %s)", st.Version, st.Commit, *st.Date)
}

// Command is `relay version`.
func Command(stdout io.Writer) *cobra.Command {
	var out cmdutil.Output
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this binary was built from",
		Example: `  relay version
  relay version -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if out.JSON() {
				info, _ := debug.ReadBuildInfo()
				return cmdutil.WriteJSON(stdout, resolve(version, commit, date, info))
			}
			_, err := fmt.Fprintln(stdout, "relay "+Text())
			return err
		},
	}
	out.Flags(cmd.Flags())
	return cmd
}
