package desktop

import (
	"bytes"
	"image/png"
	"log/slog"
	"slices"
	"testing"
)

// TestTrayFollowsTheApp: the tray's title follows the connection and
// counts the failed deliveries the hidden window has not shown, until the
// window is shown again.
func TestTrayFollowsTheApp(t *testing.T) {
	a := New(Options{Log: slog.New(slog.DiscardHandler)})
	var got []string
	a.SetTray(func(s TrayStatus) { got = append(got, s.Title()) })
	a.connState(ConnState{State: StateConnected})
	a.forwarded(Row{Method: "POST", Path: "/seen", Status: 500}) // the window shows it
	a.BeforeClose()
	a.forwarded(Row{Method: "GET", Path: "/fine", Status: 200})
	a.forwarded(Row{Method: "POST", Path: "/a", Status: 502})
	a.forwarded(Row{Method: "POST", Path: "/b", Error: "connection refused"})
	a.connState(ConnState{State: StateReconnecting, Reason: "server closed the connection"})
	a.ShowWindow()
	want := []string{
		"Relay: Not forwarding",
		"Relay: Connected",
		"Relay: Connected", // hidden
		"Relay: Connected, 1 failed delivery",
		"Relay: Connected, 2 failed deliveries",
		"Relay: Reconnecting, 2 failed deliveries",
		"Relay: Reconnecting", // shown: the rows show them
	}
	if !slices.Equal(got, want) {
		t.Errorf("tray titles\n got %q\nwant %q", got, want)
	}
}

func TestTrayIconIsAPNG(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range []string{StateOff, StateConnecting, StateConnected, StateReconnecting, StateRefused} {
		b := trayIcon(s)
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if r := img.Bounds(); r.Dx() != 32 || r.Dy() != 32 {
			t.Errorf("%s: icon %v, want 32×32", s, r)
		}
		seen[string(b)] = true
	}
	if len(seen) != 4 { // connecting and reconnecting share amber
		t.Errorf("%d distinct icons, want 4", len(seen))
	}
}
