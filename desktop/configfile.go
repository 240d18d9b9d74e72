package desktop

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/relayhq/relay/clientconfig"
)

// LoginFile is the file `relay login` writes (package clientconfig): the
// relay's URL and, when no credential store took it, the token.
type LoginFile struct{ path string }

// DefaultLoginFile is the file in the user's config folder.
func DefaultLoginFile() (LoginFile, error) {
	p, err := clientconfig.Path()
	if err != nil {
		return LoginFile{}, err
	}
	return LoginFile{path: p}, nil
}

func (f LoginFile) Path() string { return f.path }

// Load reads the file; no file is an empty login.
func (f LoginFile) Load() (Credentials, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return Credentials{}, nil
	}
	if err != nil {
		return Credentials{}, fmt.Errorf("read %s: %w", f.path, err)
	}
	var c clientconfig.Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Credentials{}, fmt.Errorf("read %s: %w (fix or delete it, then sign in again)", f.path, err)
	}
	return Credentials{Server: c.Server, Token: c.Token}, nil
}

// Save writes the file, mode 0600.
func (f LoginFile) Save(c Credentials) error {
	return clientconfig.Save(f.path, clientconfig.Config{Server: c.Server, Token: c.Token})
}
