package domain_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestAccountEntriesFitASnapshot: the most tokens, members and open
// invites an account can hold, from the caps each is held to, is below
// what one snapshot holds.
func TestAccountEntriesFitASnapshot(t *testing.T) {
	// API tokens; then per seat (a member, or an open invite holding one)
	// the member and their sessions.
	most := domain.MaxTokens + domain.MaxMembers*(1+domain.MaxSessions)
	if domain.MaxAccountEntries < most {
		t.Errorf("MaxAccountEntries is %d, the caps allow %d", domain.MaxAccountEntries, most)
	}
	if most > domain.MaxAccountSnapshotEntries {
		t.Errorf("an account at its caps holds %d entries, a snapshot at most %d", most, domain.MaxAccountSnapshotEntries)
	}
}

// membersAccount is an account whose owner mem-0 was joined by members
// mem-1… up to n members, each signed in once, as its events.
func membersAccount(n int) []domain.Event {
	evs := []domain.Event{domain.AccountCreated{AccountID: "acc-1", Name: "Team"}}
	for i := range n {
		role := "member"
		if i == 0 {
			role = "owner"
		}
		id := fmt.Sprintf("mem-%d", i)
		evs = append(evs, domain.MemberJoined{AccountID: "acc-1", MemberID: id, Login: id, Role: role, PasswordSealed: testSealed},
			domain.TokenIssued{AccountID: "acc-1", TokenID: "s-" + id, TokenHash: strings.Repeat("c", 64), Name: "browser session",
				MemberID: id, Kind: domain.TokenKindSession})
	}
	return evs
}

func memberInvited(id string, expires time.Time) domain.MemberInvited {
	return domain.MemberInvited{AccountID: "acc-1", InviteID: id, CodeHash: strings.Repeat("d", 64), Role: "member", By: "mem-0",
		ExpiresAt: expires.Format(time.RFC3339Nano)}
}

// wantInvalid fails unless err is INVALID_INPUT on field.
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var bad *domain.InvalidInputError
	if !errors.As(err, &bad) || bad.Field != field {
		t.Fatalf("error %v, want invalid %s", err, field)
	}
}

// TestMemberCap: an account holds at most MaxMembers members and open
// invites together. An invite past that is refused until an open one
// expires; a join (of an invite made before the cap held) into a full
// account is refused until a member leaves.
func TestMemberCap(t *testing.T) {
	carol := domain.NewMember{ID: "mem-new", Login: "carol", PasswordSealed: testSealed}
	invite := func(a *domain.Account, id string, now time.Time) error {
		return a.InviteMember("mem-0", id, strings.Repeat("e", 64), domain.RoleMember, now, now.Add(time.Hour))
	}

	// One seat left, held by an open invite.
	a := domain.LoadAccount(append(membersAccount(domain.MaxMembers-1), memberInvited("minv-1", t0.Add(time.Minute))))
	err := invite(a, "minv-2", t0)
	wantInvalid(t, err, "createMemberInvite")
	if want := "149 members and 1 open invite, the most it may hold together is 150"; !strings.Contains(err.Error(), want) {
		t.Errorf("refusal %q does not say %q", err, want)
	}
	if len(a.Changes()) != 0 {
		t.Fatalf("a refused invite raised %+v", a.Changes())
	}
	if err := invite(a, "minv-2", t0.Add(time.Minute)); err != nil { // minv-1 expired
		t.Fatalf("an invite once the open one expired: %v", err)
	}

	// Full, with an invite made before the cap held.
	full := append(membersAccount(domain.MaxMembers), memberInvited("minv-old", t0.Add(time.Hour)))
	a = domain.LoadAccount(full)
	wantInvalid(t, a.Join("minv-old", carol, session("s-new"), t0), "joinAccount")
	wantInvalid(t, a.CanJoin("minv-old", t0), "joinAccount")
	wantInvalid(t, invite(a, "minv-3", t0), "createMemberInvite")
	if len(a.Changes()) != 0 {
		t.Fatalf("a refused join raised %+v", a.Changes())
	}
	// A bad invite is refused in its own words, full or not.
	wantInvalid(t, a.Join("minv-9", carol, session("s-new"), t0), "code")
	if err := a.RemoveMember("mem-0", "mem-1"); err != nil {
		t.Fatal(err)
	}
	if err := a.Join("minv-old", carol, session("s-new"), t0); err != nil {
		t.Fatalf("a join once a member left: %v", err)
	}
}

// TestAccountAtTheCapsTakesSnapshots: an account driven past every cap by
// its own commands (invites and joins until refused, sign-ins past
// MaxSessions for every member, API tokens until refused) holds at most
// MaxAccountEntries entries, and a snapshot of it is due as for any
// account.
func TestAccountAtTheCapsTakesSnapshots(t *testing.T) {
	now := t0
	a, err := domain.SignUpOwner("acc-1", "Team", domain.NewMember{ID: "mem-0", Login: "ann", PasswordSealed: testSealed},
		domain.SessionToken{ID: "tok-0", Hash: strings.Repeat("a", 64), ExpiresAt: now.Add(time.Hour)}, domain.AccountFrom{})
	if err != nil {
		t.Fatal(err)
	}
	// One account runs every command, as folding its events before each
	// would (a refusal raises nothing): its changes are its whole stream.
	hash := strings.Repeat("b", 64)
	joins, refused := 0, error(nil)
	for i := range 2 * domain.MaxMembers {
		inv, id := fmt.Sprintf("minv-%d", i), fmt.Sprintf("mem-%d", i+1)
		if refused = a.InviteMember("mem-0", inv, hash, domain.RoleMember, now, now.Add(time.Hour)); refused != nil {
			break
		}
		if err := a.Join(inv, domain.NewMember{ID: id, Login: id, PasswordSealed: testSealed},
			domain.SessionToken{ID: "s-" + id, Hash: hash, ExpiresAt: now.Add(time.Hour)}, now); err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
		joins++
	}
	st := a.State(now)
	for _, m := range st.Members {
		for i := range domain.MaxSessions + 2 {
			if err := a.IssueMemberToken(fmt.Sprintf("s-%s-%d", m.ID, i), hash, "browser session", now.Add(time.Hour), m.ID, domain.TokenKindSession); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range domain.MaxTokens + 1 {
		err = a.IssueMemberToken(fmt.Sprintf("t-%d", i), hash, "laptop", time.Time{}, "mem-0", "")
	}
	wantInvalid(t, err, "createToken")

	events := a.Changes()
	acc := domain.LoadAccount(events)
	st = acc.State(now)
	n := len(st.Tokens) + len(st.Members) + len(st.Invites)
	t.Logf("%d joins, %d events: %d tokens, %d members, %d invites", joins, len(events), len(st.Tokens), len(st.Members), len(st.Invites))
	if len(st.Members) != domain.MaxMembers || n > domain.MaxAccountEntries {
		t.Errorf("%d members and %d entries, want %d members and at most %d entries", len(st.Members), n, domain.MaxMembers, domain.MaxAccountEntries)
	}
	snap, due := acc.Snapshot(now)
	if !due {
		t.Fatalf("no snapshot due after %d events of an account of %d entries", len(events), n)
	}
	wantInvalid(t, refused, "createMemberInvite")
	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("its snapshot: %d entries, %d bytes of JSON", n, len(data))
	if _, due := domain.LoadAccount([]domain.Event{snap}).Snapshot(now); due {
		t.Fatal("a snapshot is due right after one")
	}
}
