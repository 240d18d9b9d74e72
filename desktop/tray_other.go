//go:build desktop && !linux

package desktop

import "runtime"

// StartTray: the tray icon is Linux's only for now (docs/desktop.md: the
// library's macOS and Windows parts have not been run beside the Wails
// window). There, closing the window hides it and starting the program
// again shows it.
func (a *App) StartTray() {
	a.log.Info("no tray icon on " + runtime.GOOS + ": start relay-desktop again to show the hidden window")
}
