package desktop

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// routesFile keeps, between runs, each Endpoint's local target and whether
// its switch was on, for one relay: starting the program again resumes
// forwarding as it was. It sits next to the login file (desktop.json).
type routesFile struct{ path string }

type savedRoutes struct {
	Server string       `json:"server"`
	Routes []savedRoute `json:"routes"`
}

type savedRoute struct {
	EndpointID string `json:"endpointId"`
	Target     string `json:"target,omitempty"`
	On         bool   `json:"on,omitempty"`
}

func routesFileFor(s Store) routesFile {
	if s.Config == nil || s.Config.Path() == "" {
		return routesFile{}
	}
	return routesFile{path: filepath.Join(filepath.Dir(s.Config.Path()), "desktop.json")}
}

// load returns the saved routes of server; none when the file is for
// another relay, missing or unreadable (it is a convenience, not state the
// relay depends on).
func (f routesFile) load(server string) []savedRoute {
	if f.path == "" {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil
	}
	var s savedRoutes
	if json.Unmarshal(b, &s) != nil || s.Server != server {
		return nil
	}
	return s.Routes
}

func (f routesFile) save(server string, routes []savedRoute) error {
	if f.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(savedRoutes{Server: server, Routes: routes}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return fmt.Errorf("save switches: %w", err)
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save switches: %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("save switches: %w", err)
	}
	return nil
}

func (f routesFile) remove() {
	if f.path == "" {
		return
	}
	// A file left behind is replaced by the next save.
	_ = os.Remove(f.path)
}
