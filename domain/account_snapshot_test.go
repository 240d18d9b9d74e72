package domain_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// accountHistory is an account's history made by its own commands, as a
// relay would record them: a quick mix of tokens made and revoked, sign-ins
// past MaxSessions, invites used, left to expire or still open, members
// joining, changing role and password and leaving, quota overrides. Each
// step folds the events so far (from the newest snapshot) and appends a
// snapshot when one is due, as commands.loadAccount does; snapshots is
// false for a log written before snapshots existed.
type accountHistory struct {
	t         testing.TB
	rng       *rand.Rand
	now       time.Time
	events    []domain.Event
	snapshots bool
	snapAt    map[int]time.Time // when the snapshot at each index was taken
	n         int               // ids made so far
}

const sealedPassword = "aes256gcm:v1:0f1e2d3c4b5a6978:AAAA"

func newAccountHistory(t testing.TB, seed uint64, snapshots bool) *accountHistory {
	t.Helper()
	h := &accountHistory{t: t, rng: rand.New(rand.NewPCG(seed, 1)), now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), snapshots: snapshots,
		snapAt: map[int]time.Time{}}
	a, err := domain.SignUpOwner("acc-1", "Ada", domain.NewMember{ID: "mem-0", Login: "ada", PasswordSealed: sealedPassword},
		domain.SessionToken{ID: h.id("tok"), Hash: strings.Repeat("a", 64), ExpiresAt: h.now.Add(7 * 24 * time.Hour)}, domain.AccountFrom{})
	if err != nil {
		t.Fatal(err)
	}
	h.events = a.Changes()
	return h
}

func (h *accountHistory) id(kind string) string { h.n++; return fmt.Sprintf("%s-%d", kind, h.n) }

// tail is the events from the newest snapshot on.
func (h *accountHistory) tail() []domain.Event {
	for i := len(h.events) - 1; i >= 0; i-- {
		if _, ok := h.events[i].(domain.AccountSnapshot); ok {
			return h.events[i:]
		}
	}
	return h.events
}

// full is every event but the snapshots: the fold of a relay without them.
func (h *accountHistory) full() *domain.Account {
	var out []domain.Event
	for _, e := range h.events {
		if _, ok := e.(domain.AccountSnapshot); !ok {
			out = append(out, e)
		}
	}
	return domain.LoadAccount(out)
}

// step runs one random command on the account folded from its tail.
func (h *accountHistory) step() {
	h.t.Helper()
	h.now = h.now.Add(time.Duration(h.rng.IntN(600)) * time.Second)
	a := domain.LoadAccount(h.tail())
	if h.snapshots {
		if snap, due := a.Snapshot(h.now); due {
			h.snapAt[len(h.events)] = h.now
			h.events = append(h.events, snap)
			a = domain.LoadAccount([]domain.Event{snap})
		}
	}
	h.command(a, h.rng.IntN(9))
	h.events = append(h.events, a.Changes()...)
}

// command runs command c on a (a refusal is a decision too: it raises
// nothing). The folds compared run the same commands.
func (h *accountHistory) command(a *domain.Account, c int) {
	st := a.State(h.now)
	pick := func(n int) int { return h.rng.IntN(max(n, 1)) }
	member := "mem-0"
	if len(st.Members) > 0 {
		member = st.Members[pick(len(st.Members))].ID
	}
	hash := strings.Repeat("b", 64)
	switch c {
	case 0, 1: // an API token, or a sign-in
		kind := ""
		if c == 1 {
			kind = domain.TokenKindSession
		}
		_ = a.IssueMemberToken(h.id("tok"), hash, "t", h.now.Add(time.Hour), member, kind)
	case 2: // a token revoked, sometimes one revoked long ago
		id := fmt.Sprintf("tok-%d", pick(h.n)+1)
		if len(st.Tokens) > 0 && h.rng.IntN(4) > 0 {
			id = st.Tokens[pick(len(st.Tokens))].ID
		}
		_ = a.RevokeTokenBy(member, id)
	case 3: // an invite, some living a moment only
		life := time.Duration(1+h.rng.IntN(3)) * time.Hour
		_ = a.InviteMember(member, h.id("minv"), hash, domain.RoleMember, h.now, h.now.Add(life))
	case 4: // a join, of any invite ever made (used, expired or open)
		inv := fmt.Sprintf("minv-%d", pick(h.n)+1)
		_ = a.Join(inv, domain.NewMember{ID: h.id("mem"), Login: "x", PasswordSealed: sealedPassword},
			domain.SessionToken{ID: h.id("tok"), Hash: hash, ExpiresAt: h.now.Add(time.Hour)}, h.now)
	case 5:
		_ = a.ChangeRole("", member, []domain.Role{domain.RoleOwner, domain.RoleMember}[pick(2)])
	case 6:
		if h.rng.IntN(3) == 0 {
			_ = a.RemoveMember("", member)
		}
	case 7:
		_ = a.ChangePassword(member, sealedPassword, "")
	case 8:
		_ = a.SetQuota(int64(pick(1<<20)), "", "")
	}
}

// TestAccountSnapshotMatchesAFullFold: at every step of a long history,
// the account folded from its newest snapshot holds what the whole
// stream's fold holds and decides every next command alike; every snapshot
// is the state the events before it fold to. (A token revoked before a
// snapshot is unknown to the fold from it: revoking it again raises
// nothing either way, refused there as an unknown id is.)
func TestAccountSnapshotMatchesAFullFold(t *testing.T) {
	h := newAccountHistory(t, 7, true)
	for i := range 4_000 {
		h.step()
		full, tail := h.full(), domain.LoadAccount(h.tail())
		if got, want := tail.State(h.now), full.State(h.now); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: the fold from the newest snapshot holds\n%+v\nthe whole stream's\n%+v", i, got, want)
		}
		// The same next command, decided by both folds.
		c, seed := i%9, h.rng.Uint64()
		for _, a := range []*domain.Account{full, tail} {
			h.rng = rand.New(rand.NewPCG(seed, 2))
			n := h.n
			h.command(a, c)
			h.n = n
		}
		if got, want := tail.Changes(), full.Changes(); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: command %d raises %+v from the newest snapshot, %+v from the whole stream", i, c, got, want)
		}
	}
	// Every snapshot is the state the events before it fold to.
	var before []domain.Event
	seen := 0
	for i, e := range h.events {
		if snap, ok := e.(domain.AccountSnapshot); ok {
			seen++
			at := h.snapAt[i]
			want := domain.LoadAccount(before).State(at)
			if got := domain.LoadAccount([]domain.Event{snap}).State(at); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(snap, want) {
				t.Fatalf("snapshot %d holds\n%+v\nthe events before it fold to\n%+v", seen, got, want)
			}
			continue
		}
		before = append(before, e)
	}
	if seen < 5 {
		t.Fatalf("%d snapshots in %d events, want at least 5", seen, len(h.events))
	}
	t.Logf("%d events, %d snapshots, the newest tail %d events", len(h.events), seen, len(h.tail()))
}

// TestAccountSnapshotDue: a snapshot is due once more than
// AccountSnapshotAfter events plus one per entry it would hold follow the
// last one, and folding it resets the count.
func TestAccountSnapshotDue(t *testing.T) {
	h := newAccountHistory(t, 1, false)
	a := domain.LoadAccount(h.events) // 3 events: the owner and their session are 2 entries
	issue := func(id string) {
		t.Helper()
		if err := a.IssueToken(id, strings.Repeat("c", 64), "t", time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 127 {
		issue(fmt.Sprintf("t-%d", i))
		_ = a.RevokeToken(fmt.Sprintf("t-%d", i))
	}
	_ = a.RevokeToken("t-0") // revoked already: raises nothing
	issue("u-1")
	issue("u-2")
	// 259 events, 4 entries: due past 260.
	if _, due := a.Snapshot(h.now); due {
		t.Fatalf("snapshot due after 259 events and 4 entries")
	}
	_ = a.RevokeToken("u-1")
	snap, due := a.Snapshot(h.now)
	if !due || len(snap.Tokens) != 2 || snap.Tokens[1].ID != "u-2" || len(snap.Members) != 1 {
		t.Fatalf("after 260 events and 3 entries: due %v, %+v", due, snap)
	}
	if _, due := domain.LoadAccount([]domain.Event{snap}).Snapshot(h.now); due {
		t.Fatal("a snapshot is due right after one")
	}
}
