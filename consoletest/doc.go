// Package consoletest drives the relay's web console in a real browser
// (Debian's Chromium, headless, through chromedp) against the real relay
// binary and the real agent: it builds cmd/relay once, runs `relay serve` on a
// random 127.0.0.1 port with a temporary data folder, and fails any test
// during which the page logs a console error or throws.
//
// Run it with `go test ./consoletest/`. Without Chromium at /usr/bin/chromium
// (or $CHROMIUM) the tests skip, except when CI=true, where they fail.
// RELAY_SCREENSHOTS=1 also writes docs/screenshots/history.png and
// docs/screenshots/detail.png (1280×800), and docs/screenshots/compare.png
// (1280×900, two attempts compared).
package consoletest
