package desktop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoginFile is the file `relay login` writes:
// os.UserConfigDir()/relay/config.json, {"server": ..., "token": ...}.
type LoginFile struct{ path string }

// DefaultLoginFile is the file in the user's config folder.
func DefaultLoginFile() (LoginFile, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return LoginFile{}, fmt.Errorf("config folder: %w", err)
	}
	return LoginFile{path: filepath.Join(dir, "relay", "config.json")}, nil
}

func (f LoginFile) Path() string { return f.path }

type loginJSON struct {
	Server string `json:"server"`
	Token  string `json:"token,omitempty"`
}

// Load reads the file; no file is an empty login.
func (f LoginFile) Load() (Credentials, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, nil
	}
	if err != nil {
		return Credentials{}, fmt.Errorf("read %s: %w", f.path, err)
	}
	var c loginJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return Credentials{}, fmt.Errorf("read %s: %w (fix or delete it, then sign in again)", f.path, err)
	}
	return Credentials{Server: c.Server, Token: c.Token}, nil
}

// Save writes c readable by its owner only (folder 0700, file 0600), in
// one rename so a crash never leaves half a token.
func (f LoginFile) Save(c Credentials) error {
	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(loginJSON{Server: c.Server, Token: c.Token}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".config-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}
