package main

import "strings"

// required lists the tools whose tests must run in CI: .ci/run installs
// each, so a test that skipped for want of one there means the install
// broke, not that the machine lacks it. A skip reason names the tool by one
// of its words (case-insensitive); the words are those the tests' skip
// messages use.
var required = []struct {
	tool  string
	words []string
}{
	{"chromium (the console's browser tests)", []string{"chromium"}},
	{"caddy (the relay behind Caddy)", []string{"caddy"}},
	{"nats-server (the cluster tests' NATS processes)", []string{"nats-server"}},
	{"the desktop agent (Xvfb, D-Bus, WebKitGTK)", []string{"xvfb", "webkitgtk", "dbus"}},
	{"TypeScript (the console's type check)", []string{"typescript"}},
}

// requiredTool returns the required tool a skip reason names, if any.
func requiredTool(reason string) (string, bool) {
	r := strings.ToLower(reason)
	for _, t := range required {
		for _, w := range t.words {
			if strings.Contains(r, w) {
				return t.tool, true
			}
		}
	}
	return "", false
}
