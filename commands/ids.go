package commands

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/relayhq/relay/record"
)

// NewAddressID returns a random id for a public address (record.NewAddressID).
func NewAddressID() string { return record.NewAddressID() }

// NewEventID returns a time-ordered UUID (record.NewEventID, the one source
// of event and attempt IDs).
func NewEventID() string { return record.NewEventID() }

// NewDeliveryID returns a time-ordered UUID for a delivery.
func NewDeliveryID() string { return record.NewEventID() }

// NewToken returns an API token and the hex SHA-256 hash that is stored instead.
func NewToken() (token, hash string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token = "rly_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	return token, HashToken(token)
}

// HashToken is the only form in which a token is stored or looked up.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
