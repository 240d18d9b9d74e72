package secrets_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relayhq/relay/secrets"
)

func gen(t *testing.T) *secrets.Key {
	t.Helper()
	k, _, err := secrets.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := gen(t)
	for _, secret := range []string{"abc123secret", "", strings.Repeat("s", 256), "ünïcode"} {
		a, err := k.Seal(secret)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := k.Seal(secret)
		if a == b {
			t.Errorf("two seals of %q are equal: the nonce is not random", secret)
		}
		if secret != "" && strings.Contains(a, secret) {
			t.Errorf("sealed form %q holds the secret", a)
		}
		if len(a) > secrets.MaxStored {
			t.Errorf("sealed form of %d bytes is %d long, over MaxStored", len(secret), len(a))
		}
		got, err := k.Open(a)
		if err != nil || got != secret {
			t.Errorf("Open(Seal(%q)) = %q, %v", secret, got, err)
		}
	}
}

func TestOpenRefuses(t *testing.T) {
	k := gen(t)
	sealed, err := k.Seal("abc123secret")
	if err != nil {
		t.Fatal(err)
	}
	// Flip one character of the ciphertext (after the last colon).
	i := strings.LastIndexByte(sealed, ':') + 5
	flipped := []byte(sealed)
	if flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	other := gen(t)
	for _, tc := range []struct {
		name   string
		key    *secrets.Key
		stored string
		want   error
	}{
		{"other key", other, sealed, secrets.ErrOtherKey},
		{"tampered", k, string(flipped), secrets.ErrMalformed},
		{"key id changed", k, strings.Replace(sealed, k.ID(), other.ID(), 1), secrets.ErrOtherKey},
		{"plain", k, "abc123secret", secrets.ErrMalformed},
		{"truncated", k, sealed[:len(sealed)-10], secrets.ErrMalformed},
		{"a MAC", k, k.MAC("abc123secret"), secrets.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.key.Open(tc.stored)
			if !errors.Is(err, tc.want) || got != "" {
				t.Fatalf("Open = %q, %v; want %v", got, err, tc.want)
			}
			if tc.want == secrets.ErrOtherKey && (!strings.Contains(err.Error(), tc.key.ID()) || !strings.Contains(err.Error(), "--secrets-key")) {
				t.Errorf("error %q names neither this key nor the flag", err)
			}
		})
	}
}

func TestMACVerify(t *testing.T) {
	k := gen(t)
	mac := k.MAC("verify-token-17")
	if strings.Contains(mac, "verify-token-17") {
		t.Fatalf("MAC %q holds the secret", mac)
	}
	if mac != k.MAC("verify-token-17") {
		t.Fatal("MAC is not deterministic: a token could not be compared")
	}
	for _, tc := range []struct {
		name      string
		key       *secrets.Key
		mac, cand string
		ok        bool
		err       error
	}{
		{"right", k, mac, "verify-token-17", true, nil},
		{"wrong", k, mac, "verify-token-18", false, nil},
		{"prefix", k, mac, "verify-token-1", false, nil},
		{"empty", k, mac, "", false, nil},
		{"other key", gen(t), mac, "verify-token-17", false, secrets.ErrOtherKey},
		{"malformed", k, "hmac-sha256:v1:" + k.ID() + ":zz", "x", false, secrets.ErrMalformed},
		{"short", k, mac[:len(mac)-2], "verify-token-17", false, secrets.ErrMalformed},
		{"sealed form", k, func() string { s, _ := k.Seal("x"); return s }(), "x", false, secrets.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := tc.key.Verify(tc.mac, tc.cand)
			if ok != tc.ok || !errors.Is(err, tc.err) {
				t.Fatalf("Verify = %v, %v; want %v, %v", ok, err, tc.ok, tc.err)
			}
		})
	}
}

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	k, err := secrets.LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != secrets.KeySize {
		t.Fatalf("key file mode %v size %d, want 0600 and %d bytes", fi.Mode().Perm(), fi.Size(), secrets.KeySize)
	}
	again, err := secrets.LoadOrCreate(path)
	if err != nil || again.ID() != k.ID() {
		t.Fatalf("reloaded key %v, %v; want the same key %s", again, err, k.ID())
	}
	sealed, _ := k.Seal("s")
	if got, err := again.Open(sealed); err != nil || got != "s" {
		t.Fatalf("the reloaded key opens %q, %v", got, err)
	}
	raw, _ := os.ReadFile(path)
	hexPath := filepath.Join(dir, "hex.key")
	if err := os.WriteFile(hexPath, []byte(strings.ToUpper(hexOf(raw))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, err := secrets.LoadOrCreate(hexPath); err != nil || h.ID() != k.ID() {
		t.Fatalf("the key written as hex reads as %v, %v", h, err)
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.LoadOrCreate(bad); err == nil || !strings.Contains(err.Error(), "32 raw bytes or 64 hex digits") {
		t.Fatalf("a short key file: %v", err)
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func FuzzOpen(f *testing.F) {
	k, _, _ := secrets.Generate()
	s, _ := k.Seal("abc")
	f.Add(s)
	f.Add(k.MAC("abc"))
	f.Fuzz(func(t *testing.T, stored string) {
		if got, err := k.Open(stored); err == nil && got != "abc" {
			// Only a form this key sealed opens; forging one is AES-GCM's to refuse.
			t.Fatalf("Open(%q) = %q without error", stored, got)
		}
		_, _ = k.Verify(stored, "abc")
	})
}
