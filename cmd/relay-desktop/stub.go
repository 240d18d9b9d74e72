//go:build !desktop

package main

import (
	"fmt"
	"os"
)

// Without the desktop build tags there is no window to show: the pure-Go
// build of the module (go build ./..., go vet ./...) stays free of cgo.
func main() {
	fmt.Fprintln(os.Stderr, "relay-desktop was built without its window; build it with\n"+
		"  CGO_ENABLED=1 go build -tags desktop,production,webkit2_41 ./cmd/relay-desktop\n"+
		"(see docs/desktop.md)")
	os.Exit(2)
}
