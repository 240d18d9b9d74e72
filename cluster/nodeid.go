package cluster

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeIDFile holds a node's generated name in its data folder, so a
// restarted node keeps its name and closes its own stale sessions.
const nodeIDFile = "node-id"

// maxNodeID bounds a node name; it is one NATS subject token and is
// written into every agent session and attempt event.
const maxNodeID = 64

// ValidNodeID checks that id is 1 to 64 letters, digits, '-' or '_': one
// NATS subject token, safe in logs and metrics.
func ValidNodeID(id string) error {
	if id == "" || len(id) > maxNodeID {
		return fmt.Errorf("node id %q: want 1 to %d characters", id, maxNodeID)
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("node id %q: only letters, digits, '-' and '_' are allowed", id)
		}
	}
	return nil
}

// NodeID returns given when it is set, else the name kept in dir, else a
// new random name that it keeps there.
func NodeID(dir, given string) (string, error) {
	if given != "" {
		return given, ValidNodeID(given)
	}
	path := filepath.Join(dir, nodeIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if err := ValidNodeID(id); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		return id, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read node id: %w", err)
	}
	raw := make([]byte, 10)
	_, _ = rand.Read(raw) // never fails on supported platforms
	id := "n-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("keep node id: %w", err)
	}
	return id, nil
}
