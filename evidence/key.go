package evidence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/relayhq/relay/internal/keyfile"
)

// LoadOrCreateKey reads the Ed25519 signing key at path (PKCS #8 in PEM),
// creating one (mode 0600) when the file does not exist; processes that
// start together on a shared folder all get the one key written.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("create checkpoint key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("create checkpoint key: %w", err)
		}
		// Nodes sharing one key folder may start together: all get the
		// key the first one wrote.
		written, err := keyfile.CreateOnce(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		if err != nil {
			return nil, fmt.Errorf("checkpoint key: %w", err)
		}
		return ParseKey(written)
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint key: %w", err)
	}
	return ParseKey(b)
}

// ParseKey reads an Ed25519 private key from PKCS #8 PEM.
func ParseKey(b []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("checkpoint key: not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("checkpoint key: %T is not an Ed25519 key", k)
	}
	return key, nil
}

// FormatPublicKey is "ed25519:" and the key in base64.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return "ed25519:" + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads what FormatPublicKey writes.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), "ed25519:")
	if !ok {
		return nil, fmt.Errorf("public key %q: want ed25519:BASE64", s)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key %q: not an Ed25519 public key", s)
	}
	return ed25519.PublicKey(b), nil
}
