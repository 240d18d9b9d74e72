package app

import (
	"log/slog"
	"path/filepath"

	"github.com/relayhq/relay/secrets"
)

// secretsKey reads (or creates) the key the addresses' handshake secrets
// and the members' password hashes are kept under: cfg.SecretsKey, else
// secrets.key in the data folder. The offline commands (NoSweeps: rebuild,
// accounts create) neither answer handshakes, set secrets nor sign anyone
// in (the views keep hashes sealed, as the log does), so they do not create
// a key a server given --secrets-key would never use: nil then.
func secretsKey(cfg Config, log *slog.Logger) (*secrets.Key, error) {
	if cfg.NoSweeps {
		return nil, nil
	}
	path := cfg.SecretsKey
	if path == "" {
		path = filepath.Join(cfg.Data, "secrets.key")
	}
	key, err := secrets.LoadOrCreate(path)
	if err != nil {
		return nil, err
	}
	// The ID names the key without revealing it: nodes that must share a
	// key can be compared by their logs.
	log.Info("secrets key", "key_id", key.ID(), "file", path)
	return key, nil
}
