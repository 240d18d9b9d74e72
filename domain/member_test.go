package domain_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// testSealed stands for an argon2id hash sealed under a secrets key: the
// domain only checks it is no plain hash or password.
const (
	testPHC    = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA"
	testSealed = "aes256gcm:v1:0f1e2d3c4b5a6978:c2VhbGVkIGhhc2g"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func session(id string) domain.SessionToken {
	return domain.SessionToken{ID: id, Hash: strings.Repeat("b", 64), ExpiresAt: t0.Add(time.Hour)}
}

// ownerAccount is the history of an account whose owner mem-1 signed up,
// invited mem-2 (a member, with a token of their own) by minv-1.
func ownerAccount() []domain.Event {
	return []domain.Event{
		domain.AccountCreated{AccountID: "acc-1", Name: "Team"},
		domain.MemberJoined{AccountID: "acc-1", MemberID: "mem-1", Login: "ann", Role: "owner", PasswordSealed: testSealed},
		domain.TokenIssued{AccountID: "acc-1", TokenID: "s-1", TokenHash: strings.Repeat("c", 64), Name: "browser session", MemberID: "mem-1", Kind: "session"},
		domain.MemberInvited{AccountID: "acc-1", InviteID: "minv-1", CodeHash: strings.Repeat("d", 64), Role: "member", By: "mem-1", ExpiresAt: t0.Add(time.Hour).Format(time.RFC3339Nano)},
		domain.MemberInviteUsed{AccountID: "acc-1", InviteID: "minv-1", MemberID: "mem-2"},
		domain.MemberJoined{AccountID: "acc-1", MemberID: "mem-2", Login: "bob", Role: "member", PasswordSealed: testSealed, By: "mem-1", InviteID: "minv-1"},
		domain.TokenIssued{AccountID: "acc-1", TokenID: "t-2", TokenHash: strings.Repeat("e", 64), Name: "laptop", MemberID: "mem-2"},
		domain.TokenIssued{AccountID: "acc-1", TokenID: "s-2", TokenHash: strings.Repeat("f", 64), Name: "browser session", MemberID: "mem-2", Kind: "session"},
	}
}

// TestMembers: given an account's history, when a command runs, then it
// raises these events or fails so.
func TestMembers(t *testing.T) {
	invited := append(ownerAccount(), domain.MemberInvited{AccountID: "acc-1", InviteID: "minv-2", CodeHash: strings.Repeat("d", 64), Role: "owner", By: "mem-1",
		ExpiresAt: t0.Add(time.Minute).Format(time.RFC3339Nano)})
	carol := domain.NewMember{ID: "mem-3", Login: " Carol ", PasswordSealed: testSealed}
	for _, tc := range []struct {
		name  string
		given []domain.Event
		when  func(a *domain.Account) error
		then  []domain.Event
		err   error
		field string
	}{
		{name: "an owner removes a member: their tokens are revoked with them", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.RemoveMember("mem-1", "mem-2") },
			then: []domain.Event{domain.MemberRemoved{AccountID: "acc-1", MemberID: "mem-2", By: "mem-1"},
				domain.TokenRevoked{AccountID: "acc-1", TokenID: "t-2", By: "mem-1"}, domain.TokenRevoked{AccountID: "acc-1", TokenID: "s-2", By: "mem-1"}}},
		{name: "a member may not remove", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.RemoveMember("mem-2", "mem-1") }, err: domain.ErrForbidden},
		{name: "the last owner cannot be removed", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.RemoveMember("mem-1", "mem-1") }, field: "member"},
		{name: "the last owner cannot be demoted", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangeRole("mem-1", "mem-1", domain.RoleMember) }, field: "member"},
		{name: "an unknown member is not found", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.RemoveMember("mem-1", "mem-9") }, err: domain.ErrNotFound},
		{name: "promote, then the former last owner may step down", given: append(ownerAccount(),
			domain.MemberRoleChanged{AccountID: "acc-1", MemberID: "mem-2", Role: "owner", By: "mem-1"}),
			when: func(a *domain.Account) error { return a.ChangeRole("mem-2", "mem-1", domain.RoleMember) },
			then: []domain.Event{domain.MemberRoleChanged{AccountID: "acc-1", MemberID: "mem-1", Role: "member", By: "mem-2"}}},
		{name: "a new password ends the member's sessions, API tokens stay", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangePassword("mem-2", testSealed, "") },
			then: []domain.Event{domain.MemberPasswordChanged{AccountID: "acc-1", MemberID: "mem-2", PasswordSealed: testSealed},
				domain.TokenRevoked{AccountID: "acc-1", TokenID: "s-2", By: "mem-2"}}},
		{name: "the session asking for a new password stays", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangePassword("mem-2", testSealed, "s-2") },
			then: []domain.Event{domain.MemberPasswordChanged{AccountID: "acc-1", MemberID: "mem-2", PasswordSealed: testSealed}}},
		{name: "a password that is no sealed hash is never recorded", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangePassword("mem-2", "correct horse battery", "") }, field: "password hash"},
		{name: "a plain argon2id hash is never recorded", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangePassword("mem-2", testPHC, "") }, field: "password hash"},
		{name: "a removed or unknown member has no password to change", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangePassword("mem-9", testSealed, "") }, err: domain.ErrNotFound},
		{name: "the same role raises nothing", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.ChangeRole("mem-1", "mem-2", domain.RoleMember) }},
		{name: "a member may not invite", given: ownerAccount(),
			when: func(a *domain.Account) error {
				return a.InviteMember("mem-2", "minv-3", strings.Repeat("d", 64), domain.RoleMember, t0, t0)
			}, err: domain.ErrForbidden},
		{name: "a used invite is refused", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.Join("minv-1", carol, session("s-3"), t0) }, field: "code"},
		{name: "an expired invite is refused", given: invited,
			when: func(a *domain.Account) error { return a.Join("minv-2", carol, session("s-3"), t0.Add(time.Minute)) }, field: "code"},
		{name: "an unknown invite is refused alike", given: invited,
			when: func(a *domain.Account) error { return a.Join("minv-9", carol, session("s-3"), t0) }, field: "code"},
		{name: "an invite spent: member joined with the invite's role, signed in", given: invited,
			when: func(a *domain.Account) error { return a.Join("minv-2", carol, session("s-3"), t0) },
			then: []domain.Event{
				domain.MemberInviteUsed{AccountID: "acc-1", InviteID: "minv-2", MemberID: "mem-3"},
				domain.MemberJoined{AccountID: "acc-1", MemberID: "mem-3", Login: "Carol", Role: "owner", PasswordSealed: testSealed, By: "mem-1", InviteID: "minv-2"},
				domain.TokenIssued{AccountID: "acc-1", TokenID: "s-3", TokenHash: strings.Repeat("b", 64), Name: "browser session",
					ExpiresAt: t0.Add(time.Hour).Format(time.RFC3339Nano), MemberID: "mem-3", Kind: "session"}}},
		{name: "a plain password is never recorded", given: invited,
			when: func(a *domain.Account) error {
				return a.Join("minv-2", domain.NewMember{ID: "mem-3", Login: "carol", PasswordSealed: "hunter2hunter2"}, session("s-3"), t0)
			}, field: "password hash"},
		{name: "set up sign-in refused once members exist", given: ownerAccount(),
			when: func(a *domain.Account) error { return a.SetUpOwner(carol, session("s-3")) }, field: "setUpSignIn"},
		{name: "a removed member gets no token", given: append(ownerAccount(), domain.MemberRemoved{AccountID: "acc-1", MemberID: "mem-2", By: "mem-1"}),
			when: func(a *domain.Account) error {
				return a.IssueMemberToken("t-9", strings.Repeat("a", 64), "x", time.Time{}, "mem-2", "")
			}, err: domain.ErrUnauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := domain.LoadAccount(tc.given)
			err := tc.when(a)
			switch {
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
			case tc.field != "":
				var bad *domain.InvalidInputError
				if !errors.As(err, &bad) || bad.Field != tc.field {
					t.Fatalf("error %v, want invalid %s", err, tc.field)
				}
			case err != nil:
				t.Fatal(err)
			}
			if tc.err != nil || tc.field != "" {
				if len(a.Changes()) != 0 {
					t.Fatalf("a refused command raised %+v", a.Changes())
				}
				return
			}
			if got := a.Changes(); !reflect.DeepEqual(got, tc.then) && (len(got) != 0 || len(tc.then) != 0) {
				t.Fatalf("raised\n %+v\nwant\n %+v", got, tc.then)
			}
		})
	}
}

func TestSessionsAreBounded(t *testing.T) {
	// The 21st session of the same history revokes the first.
	b, err := domain.SignUpOwner("acc-1", "Team", domain.NewMember{ID: "mem-1", Login: "ann", PasswordSealed: testSealed}, session("s-0"), domain.AccountFrom{})
	if err != nil {
		t.Fatal(err)
	}
	history := b.Changes()
	for i := 1; i < domain.MaxSessions; i++ {
		history = append(history, domain.TokenIssued{AccountID: "acc-1", TokenID: "s-" + string(rune('a'+i)), TokenHash: strings.Repeat("b", 64), MemberID: "mem-1", Kind: "session"})
	}
	c := domain.LoadAccount(history)
	if err := c.IssueMemberToken("s-new", strings.Repeat("b", 64), "browser session", t0, "mem-1", domain.TokenKindSession); err != nil {
		t.Fatal(err)
	}
	got := c.Changes()
	if len(got) != 2 || got[0] != (domain.TokenRevoked{AccountID: "acc-1", TokenID: "s-0", By: "mem-1"}) {
		t.Fatalf("the session beyond the bound raised %+v, want the oldest revoked first", got)
	}
}

func TestLoginClaim(t *testing.T) {
	c := domain.LoadLoginClaim(nil)
	if err := c.Claim("acc-1", "mem-1"); err != nil {
		t.Fatal(err)
	}
	taken := domain.LoadLoginClaim(c.Changes())
	if err := taken.Claim("acc-2", "mem-2"); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("claiming a held login: %v", err)
	}
	taken.Release("mem-2") // not theirs: nothing
	if len(taken.Changes()) != 0 {
		t.Fatalf("released another's login: %+v", taken.Changes())
	}
	taken.Release("mem-1")
	free := domain.LoadLoginClaim(append(c.Changes(), taken.Changes()...))
	if err := free.Claim("acc-2", "mem-2"); err != nil {
		t.Fatalf("a released login: %v", err)
	}
	if domain.LoginKeyHash(" Ann@Example.com") != domain.LoginKeyHash("ann@example.COM ") {
		t.Fatal("logins differing in case have different keys")
	}
}

func TestValidatePasswordAndLogin(t *testing.T) {
	for _, tc := range []struct {
		pw string
		ok bool
	}{{"123456789", false}, {"1234567890", true}, {strings.Repeat("x", 256), true}, {strings.Repeat("x", 257), false}} {
		if err := domain.ValidatePassword(tc.pw); (err == nil) != tc.ok {
			t.Errorf("ValidatePassword(%d bytes) = %v", len(tc.pw), err)
		}
	}
	for _, tc := range []struct {
		login string
		ok    bool
	}{{"a", true}, {"", false}, {"  ", false}, {"a\nb", false}, {strings.Repeat("é", 100), true}, {strings.Repeat("é", 101), false}} {
		if err := domain.ValidateLogin(tc.login); (err == nil) != tc.ok {
			t.Errorf("ValidateLogin(%q) = %v", tc.login, err)
		}
	}
}
