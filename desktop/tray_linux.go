//go:build desktop && linux

package desktop

import (
	"fyne.io/systray"
	"github.com/godbus/dbus/v5"
)

// watcherName is the desktop's tray host on the session bus (KDE, most
// panels; GNOME only with the AppIndicator extension).
const watcherName = "org.kde.StatusNotifierWatcher"

// StartTray puts up the tray icon: a StatusNotifierItem on the session bus
// (fyne.io/systray, pure Go, beside the GTK loop the window runs on), whose
// menu shows the connection and has "Show window" and "Quit". Without a
// session bus there is no icon; without a StatusNotifierWatcher the item
// waits and registers when one appears. Either is logged once and the
// window works as before (closing it hides it; starting the program again
// shows it). Call it once the window is up: Shutdown takes the icon down.
func (a *App) StartTray() {
	conn, err := dbus.SessionBus()
	if err != nil {
		a.log.Warn("no tray icon: no D-Bus session bus", "error", err)
		return
	}
	var has bool
	if err := conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, watcherName).Store(&has); err != nil || !has {
		a.log.Warn("no tray host yet (no " + watcherName + " on the session bus; on GNOME it needs the AppIndicator extension): the tray icon appears when one starts; until then starting relay-desktop again shows the window")
	}
	systray.SetIcon(trayIcon(StateOff))
	systray.SetTitle("Relay") // also the item's Id, which panels remember it by
	menu := make(chan *systray.MenuItem, 1)
	start, end := systray.RunWithExternalLoop(func() { menu <- a.trayMenu() }, nil)
	start()
	a.mu.Lock()
	a.trayStop = end
	a.mu.Unlock()
	// Titles change only once start has fixed the Id.
	go func() { a.followInTray(<-menu) }()
}

// trayMenu builds the tray's menu and returns its state entry.
func (a *App) trayMenu() *systray.MenuItem {
	state := systray.AddMenuItem("Not forwarding", "The agent's connection")
	state.Disable()
	systray.AddSeparator()
	show := systray.AddMenuItem("Show window", "")
	quit := systray.AddMenuItem("Quit", "Close the agent's session and quit")
	go func() {
		for {
			select {
			case <-show.ClickedCh:
				a.ShowWindow()
			case <-quit.ClickedCh:
				a.Quit()
				return
			}
		}
	}()
	return state
}

// followInTray shows the app's state in the tray: icon, title, tooltip and
// the menu's state entry.
func (a *App) followInTray(state *systray.MenuItem) {
	last := ""
	a.SetTray(func(s TrayStatus) {
		systray.SetTitle(s.Title())
		systray.SetTooltip(s.Title())
		state.SetTitle(s.Label())
		if s.State != last {
			last = s.State
			systray.SetIcon(trayIcon(s.State))
		}
	})
}
