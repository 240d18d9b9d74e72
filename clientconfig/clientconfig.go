// Package clientconfig is what `relay login` stores for the client
// commands (and other programs of the same user, such as the desktop
// agent): the relay to talk to and the account token for it, in
// os.UserConfigDir()/relay/config.json, readable by its owner only.
//
//	c, path, err := clientconfig.Load()   // no file: an empty Config
//	c.Server, c.Token = "http://localhost:8080", token
//	err = clientconfig.Save(path, c)      // folder 0700, file 0600, atomic
//
// A stored token belongs to the stored server: use it only when
// SameServer(server, c.Server).
package clientconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Config is the stored login.
type Config struct {
	Server string `json:"server"`
	Token  string `json:"token,omitempty"`
}

// Path is os.UserConfigDir()/relay/config.json.
func Path() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("config folder: %w", err)
	}
	return filepath.Join(dir, "relay", "config.json"), nil
}

// Load reads the stored config and returns it with its path; no file is
// an empty Config.
func Load() (Config, string, error) {
	path, err := Path()
	if err != nil {
		return Config{}, "", err
	}
	b, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, path, nil
	}
	if err != nil {
		return Config{}, path, err
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, path, fmt.Errorf("read %s: %w (fix or delete it, then run `relay login`)", path, err)
	}
	return c, path, nil
}

// maxFile bounds what Load reads: Save writes a server and a token, a few
// hundred bytes, so anything far larger is not its file.
const maxFile = 64 << 10

// readFile reads path, refusing a file over maxFile having read no more
// than maxFile+1 bytes of it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("read %s: over %d KiB, the most a stored login is read for (fix or delete it, then run `relay login`)", path, maxFile>>10)
	}
	return b, nil
}

// Save writes c to path readable by its owner only (folder 0700, file
// 0600), replacing the old file in one rename so a crash never leaves
// half a token.
func Save(path string, c Config) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".config-*.json") // mode 0600
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SameServer reports whether two relay URLs name the same relay, so a
// stored token is only ever sent to the relay it was issued by. The names
// of this machine (localhost, 127.0.0.1, ::1) are one host: a login
// stored for http://localhost:8080 serves http://127.0.0.1:8080 too.
// Scheme, port and path must match.
func SameServer(a, b string) bool {
	ua, errA := url.Parse(strings.TrimRight(strings.TrimSpace(a), "/"))
	ub, errB := url.Parse(strings.TrimRight(strings.TrimSpace(b), "/"))
	if errA != nil || errB != nil {
		return false
	}
	return strings.EqualFold(ua.Scheme, ub.Scheme) && ua.Port() == ub.Port() && ua.Path == ub.Path &&
		sameHost(ua.Hostname(), ub.Hostname())
}

// sameHost compares host names without case, a loopback name or address
// (localhost, 127.0.0.1, ::1) being the same as any other.
func sameHost(a, b string) bool {
	loopback := func(h string) bool {
		ip := net.ParseIP(h)
		return strings.EqualFold(h, "localhost") || (ip != nil && ip.IsLoopback())
	}
	return strings.EqualFold(a, b) || (loopback(a) && loopback(b))
}
