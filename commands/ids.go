package commands

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewAddressID returns a random 16-character id that is a valid hostname label.
// 80 random bits make addresses unguessable, which is what keeps a guest
// inspector private.
func NewAddressID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return lowerBase32.EncodeToString(b)
}

// NewEventID returns a time-ordered UUID (version 7) for an event or an
// attempt. Time order keeps the log's unique index on event IDs appending at
// its right edge instead of rewriting random pages on every commit.
func NewEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// NewDeliveryID returns a time-ordered UUID (version 7) for a delivery.
func NewDeliveryID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

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
