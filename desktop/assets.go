package desktop

import (
	"embed"
	"io/fs"
	"strings"

	"github.com/relayhq/relay/console"
)

//go:embed frontend
var frontendFS embed.FS

// Assets is the window's files: the agent's own page under "/" and the
// console's style and modules under "/console/", which the page imports
// (detail pane, badges, formatting, copy buttons). Everything is embedded:
// the window loads nothing from the network.
func Assets() fs.FS {
	own, err := fs.Sub(frontendFS, "frontend")
	if err != nil {
		panic("desktop: embedded frontend missing: " + err.Error())
	}
	return assetsFS{own: own, console: console.Assets()}
}

type assetsFS struct{ own, console fs.FS }

func (a assetsFS) Open(name string) (fs.File, error) {
	if rest, ok := strings.CutPrefix(name, "console/"); ok {
		return a.console.Open(rest)
	}
	return a.own.Open(name)
}
