package commands_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

func TestNewEventIDIsATimeOrderedUUID(t *testing.T) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = commands.NewEventID()
	}
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("id %d %q: not a canonical UUIDv7 (%v)", i, id, err)
		}
		// Strictly increasing: the log's index appends at its right edge,
		// and no two IDs are equal.
		if i > 0 && ids[i-1] >= id {
			t.Fatalf("id %d %q does not sort after id %d %q", i, id, i-1, ids[i-1])
		}
	}
}

func TestNewDeliveryIDIsAUniqueTimeOrderedUUID(t *testing.T) {
	const n = 10000
	seen := make(map[string]bool, n)
	prev := ""
	for i := range n {
		id := commands.NewDeliveryID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.String() != id {
			t.Fatalf("id %q: not a canonical UUIDv7 (%v)", id, err)
		}
		if seen[id] || id <= prev {
			t.Fatalf("id %d %q repeats or sorts before %q", i, id, prev)
		}
		seen[id], prev = true, id
	}
}

func TestNewAddressIDIsAUniqueHostnameLabel(t *testing.T) {
	const n = 10000
	// RFC 1123 label, lower case: what a browser and a resolver accept as
	// the first label of <id>.<domain>.
	label := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	seen := make(map[string]bool, n)
	for range n {
		id := commands.NewAddressID()
		if len(id) != 16 || !label.MatchString(id) {
			t.Fatalf("id %q is not a 16-character lower-case hostname label", id)
		}
		if err := domain.ValidateAddressID(id); err != nil {
			t.Fatalf("id %q: %v", id, err)
		}
		if seen[id] {
			t.Fatalf("id %q generated twice in %d", id, len(seen))
		}
		seen[id] = true
	}
}

func TestHashToken(t *testing.T) {
	for _, tc := range []struct{ token, want string }{
		// Test vectors of FIPS 180-2 and of the empty string.
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"rly_token", sha256Hex("rly_token")},
		{"rly_Token", sha256Hex("rly_Token")},
	} {
		got := commands.HashToken(tc.token)
		if got != tc.want {
			t.Errorf("HashToken(%q) = %s, want %s", tc.token, got, tc.want)
		}
		if again := commands.HashToken(tc.token); again != got {
			t.Errorf("HashToken(%q) is not deterministic: %s then %s", tc.token, got, again)
		}
	}
	if commands.HashToken("rly_token") == commands.HashToken("rly_Token") {
		t.Error("tokens differing in case hash alike")
	}
}

func TestNewToken(t *testing.T) {
	const n = 1000
	shape := regexp.MustCompile(`^rly_[a-z2-7]{52}$`) // 256 random bits in lower-case base32
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	tokens := make([]string, 0, n)
	for range n {
		token, hash := commands.NewToken()
		if !shape.MatchString(token) {
			t.Fatalf("token %q: want rly_ and 52 lower-case base32 characters", token)
		}
		if !hex64.MatchString(hash) || hash != commands.HashToken(token) {
			t.Fatalf("hash %q of %q is not HashToken(token)", hash, token)
		}
		tokens = append(tokens, token)
	}
	slices.Sort(tokens)
	if len(slices.Compact(tokens)) != n {
		t.Fatal("NewToken repeated a token")
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
