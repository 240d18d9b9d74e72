package commands

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters (RFC 9106; OWASP's password storage advice of
// m=19 MiB, t=2, p=1): a hash costs about 19 MiB and a few tens of
// milliseconds of one core, enough to make guessing a stolen hash slow
// while a relay on a small machine still signs people in quickly. They
// are written into every hash (PHC form), so raising them later leaves
// older hashes readable.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// maxHashing bounds the argon2 hashes computed at once, and so their
// memory (4 × 19 MiB): a flood of sign-ins waits rather than exhausts the
// relay's memory.
const maxHashing = 4

var hashing = make(chan struct{}, maxHashing)

// argonKey computes one argon2id key within the maxHashing bound.
func argonKey(ctx context.Context, pw, salt []byte, mem, time uint32, threads uint8, n uint32) ([]byte, error) {
	select {
	case hashing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-hashing }()
	return argon2.IDKey(pw, salt, time, mem, threads, n), nil
}

// HashPassword returns the password's argon2id hash in PHC form
// ($argon2id$v=19$m=…,t=…,p=…$salt$key, base64 without padding), salted
// with 16 random bytes. Only this form is ever recorded.
func HashPassword(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key, err := argonKey(ctx, []byte(pw), salt, argonMemoryKiB, argonTime, argonThreads, argonKeyLen)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// maxArgonMemoryKiB bounds the parameters a stored hash may ask for, so a
// bad hash in the log cannot make one sign-in cost gigabytes.
const maxArgonMemoryKiB = 256 * 1024

// VerifyPassword reports whether pw matches a PHC argon2id hash, comparing
// in constant time. A hash it cannot read never matches.
func VerifyPassword(ctx context.Context, encoded, pw string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false, nil
	}
	var mem, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &t, &p); err != nil || mem == 0 || mem > maxArgonMemoryKiB || t == 0 || t > 10 || p == 0 || p > 16 {
		return false, nil
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 || len(want) > 64 {
		return false, nil
	}
	got, err := argonKey(ctx, []byte(pw), salt, mem, t, p, uint32(len(want)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is checked against when a login is unknown, so that an
// unknown login costs the same argon2 work as a wrong password and the
// time of the answer does not tell which it was. Its salt is fixed: it
// guards no secret.
var dummyHash = sync.OnceValue(func() string {
	salt := []byte("relay-dummy-salt")
	key := argon2.IDKey([]byte("not a password anyone has"), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		b64.EncodeToString(salt), b64.EncodeToString(key))
})
