//go:build desktop

// Command relay-desktop is the agent as a desktop application: a window that signs
// in to a relay, lists the account's Endpoints, switches the agent on for
// them and shows each delivery as it is forwarded. The agent itself is the
// same library `relay agent` runs.
//
// It needs cgo and the platform's web view; on Linux:
//
//	CGO_ENABLED=1 go build -tags desktop,production,webkit2_41 ./cmd/relay-desktop
//
// (see docs/desktop.md). Built without those tags it only says so, which
// keeps `go build ./...` and `go vet ./...` pure Go.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/menu"
	"github.com/wailsapp/wails/v2/pkg/menu/keys"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	"github.com/wailsapp/wails/v2/pkg/options/linux"
	"github.com/wailsapp/wails/v2/pkg/options/mac"
	"github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/relayhq/relay/desktop"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "relay-desktop:", err)
		os.Exit(1)
	}
}

func run() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	slog.SetDefault(log) // the tray library's log lines too
	file, err := desktop.DefaultLoginFile()
	if err != nil {
		return err
	}
	app := desktop.New(desktop.Options{
		Store:  desktop.Store{Config: file, Keyring: desktop.OSKeyring{}},
		Notify: desktop.Notify,
		Log:    log,
	})
	if err := app.StartHook(); err != nil {
		return err
	}

	var trayOnce sync.Once
	appMenu := menu.NewMenu()
	relayMenu := appMenu.AddSubmenu("Relay")
	relayMenu.AddText("Hide window (keep forwarding)", keys.CmdOrCtrl("w"), func(*menu.CallbackData) { app.BeforeClose() })
	relayMenu.AddSeparator()
	relayMenu.AddText("Quit", keys.CmdOrCtrl("q"), func(*menu.CallbackData) { app.Quit() })

	return wails.Run(&options.App{
		Title:     "Relay",
		Width:     1180,
		Height:    760,
		MinWidth:  720,
		MinHeight: 480,
		Menu:      appMenu,
		AssetServer: &assetserver.Options{
			Assets: app.Assets(),
		},
		OnStartup: func(ctx context.Context) {
			app.Start(ctx, window{ctx})
			// SIGTERM and Ctrl+C quit as the Quit button does: sessions
			// closed, so the relay records the disconnect. (Wails' own
			// handler only asks to close the window, which hides it.)
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
			go func() {
				<-sig
				app.Quit()
			}()
		},
		// The tray icon once the page is up: OnStartup also runs in a
		// second start, before Wails' single-instance lock ends it.
		OnDomReady: func(context.Context) { trayOnce.Do(app.StartTray) },
		// Closing the window hides it and the agent keeps forwarding;
		// Quit (tray, menu, button, Ctrl+Q) ends the program.
		OnBeforeClose: func(context.Context) bool { return app.BeforeClose() },
		OnShutdown:    func(context.Context) { app.Shutdown() },
		// Starting the program again shows the running one's window (where
		// there is no tray icon, the only way back to it).
		SingleInstanceLock: &options.SingleInstanceLock{
			UniqueId:               singleInstanceID(),
			OnSecondInstanceLaunch: func(options.SecondInstanceData) { app.ShowWindow() },
		},
		Bind:  []any{app.Bindings()},
		Linux: &linux.Options{ProgramName: "relay-desktop", WebviewGpuPolicy: linux.WebviewGpuPolicyNever},
		Mac:   &mac.Options{About: &mac.AboutInfo{Title: "Relay", Message: "The relay's agent"}},
	})
}

// singleInstanceID is one per user and config folder, so tests (each with
// its own config folder) do not find each other's window.
func singleInstanceID() string {
	dir, _ := os.UserConfigDir()
	return fmt.Sprintf("dev.relayhq.relay-desktop.%d.%x", os.Getuid(), hash(dir))
}

func hash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// window is the Wails runtime for the app.
type window struct{ ctx context.Context }

func (w window) Emit(event string, data any) { runtime.EventsEmit(w.ctx, event, data) }
func (w window) ExecJS(js string)            { runtime.WindowExecJS(w.ctx, js) }
func (w window) Show()                       { runtime.WindowShow(w.ctx) }
func (w window) Hide()                       { runtime.WindowHide(w.ctx) }
func (w window) Quit()                       { runtime.Quit(w.ctx) }
