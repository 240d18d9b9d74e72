package desktop

import (
	"fmt"
	"os/exec"
	"runtime"

	"github.com/godbus/dbus/v5"
)

// Notify shows a desktop notification: through the freedesktop
// notification service on the session bus on Linux, through osascript on
// macOS. It returns an error when nothing could show it (no session bus,
// no notification daemon), which the caller records.
func Notify(title, body string) error {
	switch runtime.GOOS {
	case "linux", "freebsd", "openbsd", "netbsd":
		return notifyDBus(title, body)
	case "darwin":
		script := fmt.Sprintf("display notification %q with title %q", body, title)
		return exec.Command("osascript", "-e", script).Run()
	default:
		return fmt.Errorf("notifications are not supported on %s", runtime.GOOS)
	}
}

func notifyDBus(title, body string) error {
	conn, err := dbus.ConnectSessionBus()
	if err != nil {
		return fmt.Errorf("session bus: %w", err)
	}
	defer conn.Close()
	obj := conn.Object("org.freedesktop.Notifications", "/org/freedesktop/Notifications")
	call := obj.Call("org.freedesktop.Notifications.Notify", 0,
		"Relay", uint32(0), "", title, body, []string{}, map[string]dbus.Variant{}, int32(10000))
	if call.Err != nil {
		return fmt.Errorf("notification service: %w", call.Err)
	}
	return nil
}
