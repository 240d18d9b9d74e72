package commands

import (
	"context"
	"strings"
	"testing"
)

func TestPasswordHashes(t *testing.T) {
	ctx := context.Background()
	h, err := HashPassword(ctx, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Contains(h, "correct horse") {
		t.Fatalf("hash %q", h)
	}
	again, _ := HashPassword(ctx, "correct horse battery")
	if again == h {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, tc := range []struct {
		hash, pw string
		ok       bool
	}{
		{h, "correct horse battery", true},
		{h, "correct horse batterY", false},
		{h, "", false},
		{strings.Replace(h, "t=2", "t=3", 1), "correct horse battery", false}, // other parameters: another key
		{strings.Replace(h, "m=19456", "m=99999999", 1), "correct horse battery", false},
		{"$argon2i$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA", "x", false},
		{"plain text", "plain text", false},
		{dummyHash(), "not a password anyone has", true},
	} {
		ok, err := VerifyPassword(ctx, tc.hash, tc.pw)
		if err != nil || ok != tc.ok {
			t.Errorf("VerifyPassword(%.40q, %q) = %v, %v; want %v", tc.hash, tc.pw, ok, err, tc.ok)
		}
	}
}

// FuzzVerifyPassword: whatever a stored hash says, reading it neither
// fails nor asks for more than the bounded work.
func FuzzVerifyPassword(f *testing.F) {
	for _, s := range []string{"$argon2id$v=19$m=8,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=0,t=0,p=0$$", "$$$$$", "$argon2id$v=19$m=8,t=1,p=255$c2FsdA$aGFzaA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, encoded string) {
		if strings.Contains(encoded, "m=") && !strings.HasPrefix(encoded, "$argon2id$v=19$m=8,") {
			// Keep fuzzed memory small: the bound itself is checked above.
			return
		}
		_, _ = VerifyPassword(context.Background(), encoded, "pw")
	})
}

// BenchmarkHashPassword is the argon2id work of one sign-up or password
// change; BenchmarkVerifyPassword that of one sign-in (a wrong password and
// an unknown login cost the same). Figures in docs/benchmarks.md.
func BenchmarkHashPassword(b *testing.B) {
	for b.Loop() {
		if _, err := HashPassword(b.Context(), "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyPassword(b *testing.B) {
	h, err := HashPassword(b.Context(), "correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if ok, err := VerifyPassword(b.Context(), h, "a wrong password"); err != nil || ok {
			b.Fatal(ok, err)
		}
	}
}
