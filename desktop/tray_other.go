//go:build desktop && !linux

package desktop

import "runtime"

// StartTray: the tray icon is Linux's only (docs/desktop.md). On macOS the
// tray library's Cocoa delegate would compete with the window's, and on
// Windows it has not been run; there, closing the window hides it and
// starting the program again shows it.
func (a *App) StartTray() {
	a.log.Info("no tray icon on " + runtime.GOOS + ": start relay-desktop again to show the hidden window")
}
