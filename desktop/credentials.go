package desktop

import (
	"fmt"
	"strings"

	"github.com/zalando/go-keyring"
)

// keyringService names the relay's entries in the OS credential store
// (Secret Service on Linux, Keychain on macOS, Credential Manager on
// Windows); the entry's user is the relay's URL.
const keyringService = "relay"

// Credentials are a relay's URL and an account token for it.
type Credentials struct {
	Server string
	Token  string
}

// Store of the desktop agent's sign-in. The relay's URL always goes to the
// config file `relay login` writes, so both programs agree on the relay.
// The token goes to the OS credential store when one answers, else to
// that file (mode 0600), as `relay login` stores it.
type Store struct {
	Config  ConfigFile
	Keyring Keyring
}

// ConfigFile is the stored login of `relay login`.
type ConfigFile interface {
	Load() (Credentials, error)
	Save(Credentials) error
	Path() string
}

// Keyring is the part of go-keyring the store needs.
type Keyring interface {
	Get(service, user string) (string, error)
	Set(service, user, secret string) error
	Delete(service, user string) error
}

// OSKeyring is the OS credential store through go-keyring.
type OSKeyring struct{}

func (OSKeyring) Get(service, user string) (string, error) { return keyring.Get(service, user) }
func (OSKeyring) Set(service, user, secret string) error   { return keyring.Set(service, user, secret) }
func (OSKeyring) Delete(service, user string) error        { return keyring.Delete(service, user) }

// Where says in which store a token was found or put.
type Where string

const (
	InKeyring Where = "keyring"
	InFile    Where = "file"
	Nowhere   Where = ""
)

// Load returns the stored relay and token: the credential store's token
// for the stored relay, else the token in the config file (what `relay
// login` wrote). A credential store that does not answer (no keyring
// daemon) is not an error: the file is read.
func (s Store) Load() (Credentials, Where, error) {
	c, err := s.Config.Load()
	if err != nil {
		return Credentials{}, Nowhere, err
	}
	if c.Server == "" {
		return c, Nowhere, nil
	}
	if s.Keyring != nil {
		if tok, err := s.Keyring.Get(keyringService, keyringUser(c.Server)); err == nil && tok != "" {
			return Credentials{Server: c.Server, Token: tok}, InKeyring, nil
		}
	}
	if c.Token != "" {
		return c, InFile, nil
	}
	return c, Nowhere, nil
}

// Save stores c: the token in the credential store when it accepts it,
// else in the file. A token `relay login` stored in the file for the same
// relay stays there, so signing in to the window does not log the command
// line out; the file names the window's relay either way.
func (s Store) Save(c Credentials) (Where, error) {
	if s.Keyring != nil {
		if err := s.Keyring.Set(keyringService, keyringUser(c.Server), c.Token); err == nil {
			cur, err := s.Config.Load()
			if err != nil || keyringUser(cur.Server) != keyringUser(c.Server) {
				if err := s.Config.Save(Credentials{Server: c.Server}); err != nil {
					return Nowhere, err
				}
			}
			return InKeyring, nil
		}
	}
	if err := s.Config.Save(c); err != nil {
		return Nowhere, err
	}
	return InFile, nil
}

// Forget removes the token for server from both stores; the relay's URL
// stays, so signing in again needs only a token.
func (s Store) Forget(server string) error {
	if s.Keyring != nil {
		// A missing entry or an unreachable keyring holds nothing to delete.
		_ = s.Keyring.Delete(keyringService, keyringUser(server))
	}
	if err := s.Config.Save(Credentials{Server: server}); err != nil {
		return fmt.Errorf("forget token: %w", err)
	}
	return nil
}

// keyringUser normalizes the relay's URL so that "http://h/" and "http://h"
// find the same entry.
func keyringUser(server string) string {
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(server), "/"))
}
