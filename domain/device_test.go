package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func TestNormalUserCode(t *testing.T) {
	for in, want := range map[string]string{
		"BCDF-GHJK": "BCDFGHJK", "bcdf ghjk": "BCDFGHJK", "bcdfghjk": "BCDFGHJK",
		"BCDF-GHJ": "", "BCDF-GHJKL": "", "ABCD-EFGH": "", "BCDF-GHJ1": "", "": "", "BCDF_GHJK": "",
	} {
		if got := domain.NormalUserCode(in); got != want {
			t.Errorf("NormalUserCode(%q) = %q, want %q", in, got, want)
		}
	}
	if got := domain.DisplayUserCode("BCDFGHJK"); got != "BCDF-GHJK" {
		t.Errorf("DisplayUserCode = %q", got)
	}
}

func FuzzNormalUserCode(f *testing.F) {
	for _, s := range []string{"BCDF-GHJK", "bcdf ghjk", "x", "ÄÖÜ-ßßßß"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := domain.NormalUserCode(s)
		if n == "" {
			return
		}
		if len(n) != 8 || strings.Trim(n, domain.UserCodeAlphabet) != "" || domain.NormalUserCode(domain.DisplayUserCode(n)) != n {
			t.Fatalf("%q normalised to %q", s, n)
		}
	})
}

func TestDeviceAuthorization(t *testing.T) {
	now := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	hash := strings.Repeat("a", 64)
	open := func(t *testing.T) *domain.DeviceAuthorization {
		t.Helper()
		d, err := domain.RequestDeviceCode("dev-1", hash, hash, "laptop", "", now.Add(domain.DeviceCodeLifetime))
		if err != nil {
			t.Fatal(err)
		}
		return domain.LoadDeviceAuthorization(d.Changes())
	}
	if _, err := domain.RequestDeviceCode("dev-1", hash, hash, "", "", now); err == nil {
		t.Error("a device without a name was accepted")
	}

	d := open(t)
	if err := d.Redeem("tok", now); !errors.Is(err, domain.ErrAuthorizationPending) {
		t.Errorf("redeem before approval: %v", err)
	}
	if err := d.Approve("acc-1", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := d.Deny("acc-2", now.Add(time.Minute)); err == nil {
		t.Error("a decided code was decided again")
	}
	if err := d.Redeem("tok", now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := d.Redeem("tok2", now.Add(2*time.Minute)); !errors.Is(err, domain.ErrExpiredToken) {
		t.Errorf("a second redemption: %v, want ErrExpiredToken", err)
	}
	if r := d.Changes()[1].(domain.DeviceRedeemed); r.AccountID != "acc-1" || r.TokenID != "tok" {
		t.Errorf("redeemed %+v", r)
	}

	d = open(t)
	if err := d.Deny("acc-1", now); err != nil {
		t.Fatal(err)
	}
	if err := d.Redeem("tok", now); !errors.Is(err, domain.ErrAccessDenied) {
		t.Errorf("redeem after denial: %v", err)
	}

	d = open(t)
	late := now.Add(domain.DeviceCodeLifetime)
	if err := d.Approve("acc-1", late); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("approval at expiry: %v", err)
	}
	if err := d.Redeem("tok", late); !errors.Is(err, domain.ErrExpiredToken) {
		t.Errorf("redeem at expiry: %v", err)
	}
}

func TestParseSignupMode(t *testing.T) {
	for in, want := range map[string]domain.SignupMode{"open": domain.SignupOpen, "true": domain.SignupOpen, "INVITE": domain.SignupInvite,
		"closed": domain.SignupClosed, "false": domain.SignupClosed} {
		if got, err := domain.ParseSignupMode(in); err != nil || got != want {
			t.Errorf("ParseSignupMode(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "maybe", "invites"} {
		if _, err := domain.ParseSignupMode(bad); err == nil {
			t.Errorf("ParseSignupMode(%q) accepted", bad)
		}
	}
}

func TestInviteIsUsedOnce(t *testing.T) {
	now := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	v, err := domain.CreateInvite("inv-1", strings.Repeat("a", 64), "acc-1", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v = domain.LoadInvite(v.Changes())
	if err := v.Use("acc-2", now.Add(time.Hour)); err == nil {
		t.Error("an expired invite was used")
	}
	if err := v.Use("acc-2", now); err != nil {
		t.Fatal(err)
	}
	if err := v.Use("acc-3", now); err == nil {
		t.Error("an invite was used twice")
	}
	if err := domain.LoadInvite(nil).Use("acc-2", now); err == nil {
		t.Error("an invite that does not exist was used")
	}
}
