package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Set at release with -ldflags "-X main.version=... -X main.commit=... -X main.date=..."
// (scripts/npm-pack). Empty in a plain go build, which falls back to what
// the Go toolchain recorded in the binary.
var (
	version string
	commit  string
	date    string
)

// versionText is what `relay --version` prints after the program's name,
// e.g. "0.3.0 (commit abc1234, built 2026-11-23)". Without release stamps
// it reports the module version and VCS revision the toolchain embedded,
// so a build from a modified tree says so.
func versionText() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(version, commit, date, info)
}

func formatVersion(version, commit, date string, info *debug.BuildInfo) string {
	var revision, modified string
	if info != nil {
		if version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
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
	if date == "" {
		return fmt.Sprintf("%s (commit %s)", version, commit)
	}
	return fmt.Sprintf("%s (commit %s, built %s)", version, commit, date)
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version and commit this binary was built from",
		Example: `  relay version`,
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, "relay "+versionText())
			return err
		},
	}
}
