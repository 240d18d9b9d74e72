package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func TestParseTokenLifetime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30d", 30 * 24 * time.Hour, true},
		{"1d", 24 * time.Hour, true},
		{"12h", 12 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1m", time.Minute, true},
		{"3650d", domain.MaxTokenLifetime, true},
		{"3651d", 0, false},
		{"59s", 0, false},
		{"0d", 0, false},
		{"-1h", 0, false},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"soon", 0, false},
		{"", 0, false},
		{"99999d", 0, false},
	} {
		got, err := domain.ParseTokenLifetime(tc.in)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("ParseTokenLifetime(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		var bad *domain.InvalidInputError
		if !tc.ok && (!errors.As(err, &bad) || bad.Field != "expiresIn") {
			t.Errorf("ParseTokenLifetime(%q) = %v, %v; want an expiresIn error", tc.in, got, err)
		}
	}
}

func FuzzParseTokenLifetime(f *testing.F) {
	for _, s := range []string{"30d", "12h", "1m", "0d", "-5m", "9999d", "1h30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := domain.ParseTokenLifetime(s)
		if err == nil && (d < time.Minute || d > domain.MaxTokenLifetime) {
			t.Fatalf("%q gave %v outside the bounds", s, d)
		}
	})
}

func TestAccountTokens(t *testing.T) {
	hash := strings.Repeat("a", 64)
	a, err := domain.SignUp("acc-1", "Ada", "tok-1", hash, domain.AccountFrom{})
	if err != nil {
		t.Fatal(err)
	}
	acc := domain.LoadAccount(a.Changes())
	if err := acc.IssueToken("tok-2", strings.Repeat("b", 64), " ", time.Time{}); err == nil {
		t.Error("a blank name was accepted")
	}
	if err := acc.IssueToken("tok-2", strings.Repeat("b", 64), "a\nb", time.Time{}); err == nil {
		t.Error("a name of two lines was accepted")
	}
	exp := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := acc.IssueToken("tok-2", strings.Repeat("b", 64), " laptop ", exp); err != nil {
		t.Fatal(err)
	}
	issued := acc.Changes()[0].(domain.TokenIssued)
	if issued.Name != "laptop" || issued.ExpiresAt != "2027-01-02T03:04:05Z" || issued.TokenHash != strings.Repeat("b", 64) {
		t.Errorf("issued %+v", issued)
	}
	if err := acc.RevokeToken("tok-unknown"); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("revoke unknown: %v, want ErrNotFound", err)
	}
	if err := acc.RevokeToken("tok-1"); err != nil {
		t.Fatal(err)
	}
	if err := acc.RevokeToken("tok-1"); err != nil || len(acc.Changes()) != 2 {
		t.Errorf("revoking twice: %v, %d changes; want one TokenRevoked", err, len(acc.Changes()))
	}
	if first := a.Changes()[1].(domain.TokenIssued); first.Name != domain.FirstTokenName {
		t.Errorf("sign-up token named %q", first.Name)
	}
}

func TestAccountHoldsAtMostMaxTokens(t *testing.T) {
	a, err := domain.SignUp("acc-1", "Ada", "tok-0", strings.Repeat("a", 64), domain.AccountFrom{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < domain.MaxTokens; i++ {
		if err := a.IssueToken("tok-"+string(rune('A'+i%26))+strings.Repeat("x", i), strings.Repeat("c", 64), "n", time.Time{}); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	if err := a.IssueToken("one-too-many", strings.Repeat("d", 64), "n", time.Time{}); err == nil {
		t.Fatal("token past MaxTokens accepted")
	}
	if err := a.RevokeToken("tok-0"); err != nil {
		t.Fatal(err)
	}
	if err := a.IssueToken("one-more", strings.Repeat("d", 64), "n", time.Time{}); err != nil {
		t.Fatalf("after a revocation: %v", err)
	}
}
