package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// clientConfig is what `relay login` stores in
// os.UserConfigDir()/relay/config.json: the relay client commands talk to
// and the account token for it.
type clientConfig struct {
	Server string `json:"server"`
	Token  string `json:"token,omitempty"`
}

func clientConfigPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("config folder: %w", err)
	}
	return filepath.Join(dir, "relay", "config.json"), nil
}

// loadClientConfig reads the stored config; no file is an empty config.
func loadClientConfig() (clientConfig, string, error) {
	path, err := clientConfigPath()
	if err != nil {
		return clientConfig{}, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return clientConfig{}, path, nil
	}
	if err != nil {
		return clientConfig{}, path, fmt.Errorf("read %s: %w", path, err)
	}
	var c clientConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return clientConfig{}, path, fmt.Errorf("read %s: %w (fix or delete it, then run `relay login`)", path, err)
	}
	return c, path, nil
}

// saveClientConfig writes c to path readable by its owner only (folder
// 0700, file 0600), replacing the old file in one rename so a crash
// never leaves half a token.
func saveClientConfig(path string, c clientConfig) error {
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

// sameServer reports whether two relay URLs name the same relay, so a
// stored token is only ever sent to the relay it was issued by.
func sameServer(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(strings.TrimSpace(a), "/"), strings.TrimRight(strings.TrimSpace(b), "/"))
}

const defaultServer = "http://localhost:8080"

// errNotLoggedIn is returned when a command needs a token and none was
// given by flag, environment or `relay login`.
var errNotLoggedIn = usage(errors.New("no token: pass --token, set RELAY_TOKEN or run `relay login`"))

// connection is the --server and --token of a client command.
type connection struct{ server, token string }

func (c *connection) flags(fs *pflag.FlagSet) {
	fs.StringVar(&c.server, "server", defaultServer, "the relay's URL (else RELAY_SERVER, else the one stored by relay login)")
	fs.StringVar(&c.token, "token", "", "API token (else RELAY_TOKEN, else the one stored by relay login for this server)")
}

// resolve fills what flags and environment left unset from the stored
// config: flag > env > config file > default. The stored token is used
// only with the stored server.
func (c *connection) resolve(fs *pflag.FlagSet, env func(string) string) error {
	if err := bindEnv(fs, env); err != nil {
		return usage(err)
	}
	if fs.Changed("server") && fs.Changed("token") {
		return nil
	}
	stored, _, err := loadClientConfig()
	if err != nil {
		return err
	}
	if !fs.Changed("server") && stored.Server != "" {
		c.server = stored.Server
	}
	if !fs.Changed("token") && stored.Token != "" && sameServer(c.server, stored.Server) {
		c.token = stored.Token
	}
	return nil
}

// agentDefaults puts the stored server and token in front of the agent's
// own arguments when neither its flags nor RELAY_SERVER / RELAY_TOKEN give
// them; the agent's flag parser lets a later flag win, so an explicit one
// still does. The arguments never leave this process.
func agentDefaults(args []string, env func(string) string) ([]string, error) {
	server, serverGiven := flagValue(args, "server")
	_, tokenGiven := flagValue(args, "token")
	if !serverGiven && env("RELAY_SERVER") != "" {
		server, serverGiven = env("RELAY_SERVER"), true
	}
	tokenGiven = tokenGiven || env("RELAY_TOKEN") != ""
	if serverGiven && tokenGiven {
		return args, nil
	}
	stored, _, err := loadClientConfig()
	if err != nil {
		return nil, err
	}
	var pre []string
	if !serverGiven && stored.Server != "" {
		server = stored.Server
		pre = append(pre, "--server", stored.Server)
	}
	if !tokenGiven && stored.Token != "" && sameServer(server, stored.Server) {
		pre = append(pre, "--token", stored.Token)
	}
	return append(pre, args...), nil
}

// flagValue finds -name / --name in Go flag syntax (value separate or
// after "="); like Go's flag package, the last one wins, and flags end
// at "--".
func flagValue(args []string, name string) (value string, found bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		t := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if t == a {
			continue
		}
		if t == name {
			value, found = "", true
			if i+1 < len(args) {
				value = args[i+1]
				i++ // the value is no flag, whatever it looks like
			}
			continue
		}
		if v, ok := strings.CutPrefix(t, name+"="); ok {
			value, found = v, true
		}
	}
	return value, found
}
