package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/relayhq/relay/internal/keyfile"
)

// KeySize is the length of a secrets key: 32 bytes.
const KeySize = 32

// Prefixes of the stored forms; the version lets the forms change later
// while the old ones still read.
const (
	macPrefix  = "hmac-sha256:v1:"
	sealPrefix = "aes256gcm:v1:"
)

// MaxStored bounds a stored form as read back from the log: a 256-byte
// secret sealed is under 450 bytes.
const MaxStored = 1024

// ErrOtherKey is returned when a stored form was made with another secrets
// key than this relay's: the relay was given a different key (or a node of
// a cluster has its own). The error's text names both key IDs.
var ErrOtherKey = errors.New("made with another secrets key")

// ErrMalformed is returned for a stored form that is not one this package
// writes.
var ErrMalformed = errors.New("not a stored secret")

// Key is a relay's secrets key with the two keys derived from it.
type Key struct {
	id   string // 16 hex digits, derived; names the key without revealing it
	mac  []byte // HMAC key for secrets that are only compared
	aead cipher.AEAD
}

// New makes a Key from its 32 raw bytes.
func New(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("secrets key: %d bytes, want %d", len(raw), KeySize)
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, raw)
		m.Write([]byte("relay secrets key: " + label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("seal")) // 32 bytes: AES-256
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Key{id: hex.EncodeToString(derive("id")[:8]), mac: derive("mac"), aead: aead}, nil
}

// Generate returns a new random key.
func Generate() (*Key, []byte, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, nil, fmt.Errorf("create secrets key: %w", err)
	}
	k, err := New(raw)
	return k, raw, err
}

// LoadOrCreate reads the key file at path, or creates it (mode 0600, 32
// random bytes) when there is none; processes that start together on a
// shared folder all get the one key written. The file holds the raw bytes; a file
// of 64 hex digits (with or without a final newline) is read too, so a key
// can be written by hand: `openssl rand -hex 32 > secrets.key`.
func LoadOrCreate(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, raw, gerr := Generate()
		if gerr != nil {
			return nil, gerr
		}
		// Nodes sharing one key folder may start together: all get the
		// key the first one wrote.
		if b, err = keyfile.CreateOnce(path, raw); err != nil {
			return nil, fmt.Errorf("secrets key: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read secrets key: %w", err)
	}
	return Parse(b)
}

// Parse reads a key file's content: 32 raw bytes or 64 hex digits.
func Parse(b []byte) (*Key, error) {
	if len(b) == KeySize {
		return New(b)
	}
	t := bytes.TrimSpace(b)
	if len(t) == 2*KeySize {
		raw, err := hex.DecodeString(string(t))
		if err == nil {
			return New(raw)
		}
	}
	return nil, fmt.Errorf("secrets key: %d bytes; want %d raw bytes or %d hex digits", len(b), KeySize, 2*KeySize)
}

// ID names the key: 16 hex digits derived from it (one-way), stored with
// each form so a change of key is told apart from a wrong secret.
func (k *Key) ID() string { return k.id }

// MAC returns the stored form of a secret the relay only compares:
// "hmac-sha256:v1:KEYID:HEX".
func (k *Key) MAC(secret string) string {
	return macPrefix + k.id + ":" + hex.EncodeToString(k.sum(secret))
}

func (k *Key) sum(secret string) []byte {
	m := hmac.New(sha256.New, k.mac)
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// Verify tells whether candidate is the secret stored as mac, comparing in
// constant time. A form made with another key is ErrOtherKey, not false:
// no candidate could match it.
func (k *Key) Verify(mac, candidate string) (bool, error) {
	rest, ok := strings.CutPrefix(mac, macPrefix)
	if !ok || len(mac) > MaxStored {
		return false, ErrMalformed
	}
	id, sum, ok := strings.Cut(rest, ":")
	if !ok {
		return false, ErrMalformed
	}
	if err := k.sameKey(id); err != nil {
		return false, err
	}
	want, err := hex.DecodeString(sum)
	if err != nil || len(want) != sha256.Size {
		return false, ErrMalformed
	}
	return subtle.ConstantTimeCompare(want, k.sum(candidate)) == 1, nil
}

// Seal returns the stored form of a secret the relay must read back:
// "aes256gcm:v1:KEYID:BASE64URL(nonce|ciphertext|tag)", with a random
// nonce. The form and key ID are authenticated with it.
func (k *Key) Seal(secret string) (string, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal secret: %w", err)
	}
	out := k.aead.Seal(nonce, nonce, []byte(secret), []byte(sealPrefix+k.id))
	return sealPrefix + k.id + ":" + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open returns the secret sealed in stored. A form sealed with another
// key is ErrOtherKey; one that fails authentication is ErrMalformed.
func (k *Key) Open(stored string) (string, error) {
	rest, ok := strings.CutPrefix(stored, sealPrefix)
	if !ok || len(stored) > MaxStored {
		return "", ErrMalformed
	}
	id, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return "", ErrMalformed
	}
	if err := k.sameKey(id); err != nil {
		return "", err
	}
	b, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(b) < k.aead.NonceSize()+k.aead.Overhead() {
		return "", ErrMalformed
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, b[:n], b[n:], []byte(sealPrefix+id))
	if err != nil {
		return "", fmt.Errorf("%w: authentication failed", ErrMalformed)
	}
	return string(plain), nil
}

func (k *Key) sameKey(id string) error {
	if id != k.id {
		return fmt.Errorf("%w: stored under secrets key %s, this relay's key is %s (give every node the key the secret was set with, --secrets-key, or set the secret again)", ErrOtherKey, id, k.id)
	}
	return nil
}
