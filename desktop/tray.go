package desktop

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
)

// TrayStatus is what the tray icon shows: the agent's connection, as the
// window labels it, and the deliveries that failed while the window was
// hidden.
type TrayStatus struct {
	State  string // StateOff, StateConnected, …
	Failed int    // failed deliveries since the window was hidden
}

// stateLabels are the window's labels (frontend/app.js, renderConn).
var stateLabels = map[string]string{
	StateOff:          "Not forwarding",
	StateConnecting:   "Connecting…",
	StateConnected:    "Connected",
	StateReconnecting: "Reconnecting",
	StateRefused:      "Refused",
}

// Label is the connection as the window names it.
func (s TrayStatus) Label() string {
	if l, ok := stateLabels[s.State]; ok {
		return l
	}
	return s.State
}

// Title is the tray item's title and tooltip.
func (s TrayStatus) Title() string {
	switch s.Failed {
	case 0:
		return "Relay: " + s.Label()
	case 1:
		return "Relay: " + s.Label() + ", 1 failed delivery"
	default:
		return fmt.Sprintf("Relay: %s, %d failed deliveries", s.Label(), s.Failed)
	}
}

// SetTray registers the tray's view of the app: f is called now and on
// every change of the connection, the window's visibility or the failures
// while hidden.
func (a *App) SetTray(f func(TrayStatus)) {
	a.mu.Lock()
	a.trayView = f
	a.mu.Unlock()
	a.trayChanged()
}

func (a *App) trayStatusLocked() TrayStatus {
	return TrayStatus{State: a.conn.State, Failed: a.failedHidden}
}

// trayChanged tells the tray the state; called after a change, unlocked.
// trayMu keeps the calls in order, so the last state read is the one shown.
func (a *App) trayChanged() {
	a.trayMu.Lock()
	defer a.trayMu.Unlock()
	a.mu.Lock()
	f, s := a.trayView, a.trayStatusLocked()
	a.mu.Unlock()
	if f != nil {
		f(s)
	}
}

// trayIcon is the tray's icon: a disc in the connection's colour (green
// connected, amber on the way, red refused, grey off), drawn here rather
// than shipped as a file. The title and tooltip say the same in words.
func trayIcon(state string) []byte {
	fill := color.NRGBA{0x9a, 0xa0, 0xa6, 0xff}
	switch state {
	case StateConnected:
		fill = color.NRGBA{0x1e, 0x8e, 0x3e, 0xff}
	case StateConnecting, StateReconnecting:
		fill = color.NRGBA{0xf2, 0x99, 0x00, 0xff}
	case StateRefused:
		fill = color.NRGBA{0xd9, 0x30, 0x25, 0xff}
	}
	const size = 32
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for y := range size {
		for x := range size {
			dx, dy := float64(x)-15.5, float64(y)-15.5
			switch d := dx*dx + dy*dy; {
			case d <= 12*12:
				img.SetNRGBA(x, y, fill)
			case d <= 15*15:
				img.SetNRGBA(x, y, color.NRGBA{0xff, 0xff, 0xff, 0xff}) // a ring, seen on dark and light panels
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // encoding an in-memory image cannot fail
	}
	return b.Bytes()
}
