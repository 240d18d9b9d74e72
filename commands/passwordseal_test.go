package commands_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/secrets"
)

// TestPasswordHashesAreSealed: a sign-up and a password change reach the
// log with the hash sealed (password_sealed, never an argon2id PHC string),
// and the sealed hash signs in; without a secrets key a password is
// refused as UNAVAILABLE rather than logged in plain.
func TestPasswordHashesAreSealed(t *testing.T) {
	key, _, err := secrets.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Secrets = key
	e := newEnv(t, cfg)
	s, err := e.svc.SignUpWithPassword(ctx(t), "Team", "ann@seal.test", "ann's long password", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.ChangePassword(ctx(t), s.Account.ID, s.Member.ID, "ann's long password", "ann's new password", ""); err != nil {
		t.Fatal(err)
	}
	sealed := 0
	for _, ev := range e.allEvents(t) {
		data := string(ev.Data)
		if strings.Contains(data, "$argon2id$") || strings.Contains(data, "password_hash") {
			t.Errorf("%s holds a plain hash: %s", ev.Type, data)
		}
		if strings.Contains(data, `"password_sealed":"aes256gcm:v1:`+key.ID()+`:`) {
			sealed++
		}
	}
	if sealed != 2 {
		t.Fatalf("%d events with a sealed hash, want the join and the change", sealed)
	}
	if _, err := e.svc.SignIn(ctx(t), "ann@seal.test", "ann's new password"); err != nil {
		t.Fatalf("sign in with the new password: %v", err)
	}
	if _, err := e.svc.SignIn(ctx(t), "ann@seal.test", "ann's long password"); !errors.Is(err, domain.ErrUnauthenticated) {
		t.Fatalf("sign in with the old password: %v, want unauthenticated", err)
	}

	keyless := newEnv(t, defaultConfig())
	if _, err := keyless.svc.SignUpWithPassword(ctx(t), "Team", "bob@seal.test", "bob's long password", "", ""); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("sign-up without a secrets key: %v, want unavailable", err)
	}
	for _, ev := range keyless.allEvents(t) {
		if ev.Type == domain.TypeMemberJoined {
			t.Fatalf("a member joined without a secrets key: %s", ev.Data)
		}
	}
}
