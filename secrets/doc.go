// Package secrets keeps the secrets an address is configured with (a Meta
// verify token, a Zoom secret token) and the members' password hashes out
// of the event log in plain text.
//
// The relay's secrets key (32 random bytes, a file in the data folder or
// --secrets-key) derives both forms the log holds instead:
//
//   - a secret the relay only compares (Meta's verify token) is kept as an
//     HMAC-SHA256 under a key derived for that use, compared in constant
//     time (Key.MAC, Key.Verify);
//   - a secret the relay must use (Zoom's, the key of an HMAC it computes;
//     a password's argon2id hash, which carries its salt and parameters)
//     is sealed with AES-256-GCM under a second derived key and a random
//     nonce (Key.Seal, Key.Open).
//
// Both forms name the key they were made with (its ID, derived from the key
// and revealing nothing of it), so a relay given another key says so
// (ErrOtherKey) instead of answering with a wrong HMAC. docs/security.md
// describes the key, its sharing between nodes and the limits of rotation.
package secrets
