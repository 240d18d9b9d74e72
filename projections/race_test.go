//go:build race

package projections

// raceEnabled tells tests that the race detector runs: it slows SQLite
// (pure Go) about twentyfold and distorts heap figures.
const raceEnabled = true
