package commands_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/cli/events"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/natstest"
)

// accountReads counts the events read from account streams.
type accountReads struct {
	domain.EventStore
	events atomic.Int64
}

func (s *accountReads) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	recs, err := s.EventStore.ReadStream(ctx, stream, from, max)
	if strings.HasPrefix(stream, string(domain.StreamAccount)+"-") {
		s.events.Add(int64(len(recs)))
	}
	return recs, err
}

func (s *accountReads) LastEvent(ctx context.Context, stream string) (domain.RecordedEvent, error) {
	e, err := s.EventStore.LastEvent(ctx, stream)
	if err == nil && strings.HasPrefix(stream, string(domain.StreamAccount)+"-") {
		s.events.Add(1)
	}
	return e, err
}

// newCountingEnv is newEnv on eventStore ("" the embedded log) with the
// account streams' reads counted; closeApp closes the relay before the
// test's end (once, whoever calls it first).
//
// The tests on such an env, which fill an account's stream with thousands
// of events and count the events its commands read, run in parallel with
// one another (t.Parallel, so never beside the package's sequential
// tests): each has its own relay in its own temp dir, none changes a
// package variable, and the events a command reads do not depend on the
// machine's load.
func newCountingEnv(t *testing.T, eventStore string) (e *env, reads *accountReads, closeApp func() error) {
	t.Helper()
	dir := t.TempDir()
	reads = &accountReads{}
	a, err := app.New(context.Background(), app.Config{Data: dir, EventStore: eventStore, NoSweeps: true, Commands: defaultConfig(),
		WrapStore: func(s domain.EventStore) domain.EventStore { reads.EventStore = s; return reads }})
	if err != nil {
		t.Fatalf("open app: %v", err)
	}
	closeApp = sync.OnceValue(a.Close)
	t.Cleanup(func() {
		if err := closeApp(); err != nil {
			t.Errorf("close app: %v", err)
		}
	})
	e = &env{dir: dir, cfg: defaultConfig(), store: a.Store(), codec: a.Codec(), views: a.Views(), hub: a.Hub(), svc: a.Service()}
	return e, reads, closeApp
}

// accountBound is what one account command may read whatever the
// account's age: the stream's last event, then windows of 512 events going
// back to its newest snapshot (two at most: one follows every 256 events
// and one per entry).
const accountBound = 2*512 + 1

// fillAccount appends events to the account's stream until it holds n,
// batch at a time, as a busy account's history: tokens made and revoked,
// a member invite, uses of its token recorded there as relays before
// token-use streams did. After each batch, when command is set, a real
// command of the account (a token made and revoked) runs, as commands do
// between the appends of a live relay.
func fillAccount(t *testing.T, e *env, accountID string, n, batch int, command bool) {
	t.Helper()
	stream := domain.AccountStream(accountID)
	for {
		last, err := e.store.LastEvent(ctx(t), stream)
		if err != nil {
			t.Fatal(err)
		}
		have := int(last.Revision) + 1
		if have >= n {
			return
		}
		var evs []domain.Event
		for i := 0; len(evs) < min(batch, n-have); i++ {
			id := fmt.Sprintf("fill-%d-%d", have, i)
			hash := commands.HashToken(id)
			switch {
			case i == 1:
				evs = append(evs, domain.MemberInvited{AccountID: accountID, InviteID: id, CodeHash: hash, Role: "member",
					ExpiresAt: time.Now().Add(time.Duration(1+have%3) * 24 * time.Hour).UTC().Format(time.RFC3339Nano)})
			case i%3 == 0:
				evs = append(evs, domain.TokenIssued{AccountID: accountID, TokenID: id, TokenHash: hash, Name: "loop"},
					domain.TokenRevoked{AccountID: accountID, TokenID: id})
			default:
				evs = append(evs, domain.TokenUsed{AccountID: accountID, TokenID: id, At: time.Now().UTC().Format(time.RFC3339Nano)})
			}
		}
		e.appendChanges(t, stream, domain.Any(), evs, accountID)
		if command {
			tok, _, err := e.svc.CreateToken(ctx(t), accountID, "between", 0)
			if err != nil {
				t.Fatalf("create a token after %d events: %v", have, err)
			}
			if err := e.svc.RevokeToken(ctx(t), accountID, tok.ID); err != nil {
				t.Fatalf("revoke a token after %d events: %v", have, err)
			}
		}
	}
}

// commandReads is how many account events one createToken and one
// revokeToken each read.
func commandReads(t *testing.T, e *env, reads *accountReads, accountID string) (create, revoke int64) {
	t.Helper()
	reads.events.Store(0)
	tok, _, err := e.svc.CreateToken(ctx(t), accountID, "measured", 0)
	if err != nil {
		t.Fatal(err)
	}
	create = reads.events.Swap(0)
	if err := e.svc.RevokeToken(ctx(t), accountID, tok.ID); err != nil {
		t.Fatal(err)
	}
	return create, reads.events.Load()
}

// TestAccountCommandReadsABoundedTail: createToken and revokeToken of an
// old, busy account read its stream from the newest snapshot, not the
// account's whole history: as much at 10 000 events (ten times the
// bound) as at 2 000.
func TestAccountCommandReadsABoundedTail(t *testing.T) {
	t.Parallel() // see newCountingEnv
	e, reads, _ := newCountingEnv(t, "")
	acc, _ := e.account(t, "busy")
	for _, n := range []int{2_000, 10_000} {
		fillAccount(t, e, acc.ID, n, 400, true)
		create, revoke := commandReads(t, e, reads, acc.ID)
		t.Logf("account stream of %d events: createToken read %d, revokeToken %d", n, create, revoke)
		if create > accountBound || revoke > accountBound {
			t.Errorf("account stream of %d events: createToken read %d events, revokeToken %d, want at most %d each", n, create, revoke, accountBound)
		}
	}
}

// checkAccountSnapshots fails unless every snapshot in the account's
// stream holds what the events before it fold to, and at least one is
// there; it returns the whole stream's fold.
func checkAccountSnapshots(t *testing.T, e *env, accountID string) *domain.Account {
	t.Helper()
	_, evs := e.stream(t, domain.AccountStream(accountID))
	var before []domain.Event
	snapshots := 0
	now := time.Now()
	for i, ev := range evs {
		snap, ok := ev.(domain.AccountSnapshot)
		if !ok {
			before = append(before, ev)
			continue
		}
		snapshots++
		// The invites filled live a day or more: open at both times.
		if want := domain.LoadAccount(before).State(now); !reflect.DeepEqual(snap, want) {
			t.Fatalf("snapshot at revision %d holds\n%+v\nthe events before it fold to\n%+v", i, snap, want)
		}
	}
	if snapshots == 0 {
		t.Fatalf("no snapshot in %d events", len(evs))
	}
	return domain.LoadAccount(before)
}

// TestAccountFoldMatchesAFullFold: on the embedded log and on JetStream,
// the account a command folds from its stream's newest snapshot holds what
// the whole stream folds to, and every snapshot is the fold of what
// precedes it.
func TestAccountFoldMatchesAFullFold(t *testing.T) {
	t.Parallel() // see newCountingEnv
	for _, s := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"sqlite", func(*testing.T) string { return "" }},
		{"jetstream", func(t *testing.T) string { return natstest.Start(t).URL() }},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e, reads, _ := newCountingEnv(t, s.store(t))
			acc, _ := e.account(t, "folded")
			if err := e.svc.SetAccountQuota(ctx(t), acc.ID, new("5GiB"), nil, nil); err != nil {
				t.Fatal(err)
			}
			for step, n := range []int{1_500, 2_200, 3_000} {
				fillAccount(t, e, acc.ID, n, 150, true)
				full := checkAccountSnapshots(t, e, acc.ID)
				recs, evs, err := domain.LoadStreamTail(ctx(t), e.store, e.codec, domain.AccountStream(acc.ID), domain.TypeAccountSnapshot)
				if err != nil {
					t.Fatal(err)
				}
				now := time.Now()
				if got, want := domain.LoadAccountTail(evs, recs[len(recs)-1].Revision).State(now), full.State(now); !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d: the fold from the newest snapshot holds\n%+v\nthe whole stream's\n%+v", step, got, want)
				}
				if create, revoke := commandReads(t, e, reads, acc.ID); create > accountBound || revoke > accountBound {
					t.Errorf("step %d: createToken read %d events, revokeToken %d", step, create, revoke)
				}
			}
		})
	}
}

// TestAccountLogWithoutSnapshotsFoldsTheSame: an account stream a relay
// before snapshots wrote (token uses on it, no snapshot) is read whole by
// its first command, which decides as before and leaves a snapshot; the
// next reads only what follows it, and the log verifies.
func TestAccountLogWithoutSnapshotsFoldsTheSame(t *testing.T) {
	t.Parallel() // see newCountingEnv
	e, reads, closeApp := newCountingEnv(t, "")
	acc, _ := e.account(t, "old")
	fillAccount(t, e, acc.ID, 5_000, 500, false)
	first, _ := commandReads(t, e, reads, acc.ID)
	if first < 5_000 {
		t.Errorf("the first command read %d events of a stream of 5 000 without snapshots", first)
	}
	checkAccountSnapshots(t, e, acc.ID)
	create, revoke := commandReads(t, e, reads, acc.ID)
	t.Logf("first command %d events, then createToken %d, revokeToken %d", first, create, revoke)
	if create > accountBound || revoke > accountBound {
		t.Errorf("after the first command: createToken read %d events, revokeToken %d, want at most %d", create, revoke, accountBound)
	}
	// A use recorded now goes to the token-use stream, not the account's.
	_, token, err := e.svc.CreateToken(ctx(t), acc.ID, "used", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.AuthenticateToken(ctx(t), token); err != nil {
		t.Fatal(err)
	}
	if recs, _ := e.stream(t, domain.TokenUseStream(acc.ID)); len(recs) != 1 {
		t.Errorf("the token-use stream holds %d events after one use, want 1", len(recs))
	}
	if err := closeApp(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := events.Command(func(string) string { return "" }, &out, &errOut)
	cmd.SetArgs([]string{"verify", "--data", e.dir})
	if err := cmd.ExecuteContext(ctx(t)); err != nil || !strings.Contains(out.String(), "ok: ") {
		t.Fatalf("relay events verify: %v\n%s%s", err, out.String(), errOut.String())
	}
}

// fullAccount appends to the account's stream what an account at every cap
// holds: domain.MaxMembers members (the first an owner) with
// domain.MaxSessions sessions each, and API tokens up to domain.MaxTokens
// (its first token is one).
func fullAccount(t *testing.T, e *env, accountID string) {
	t.Helper()
	const sealed = "aes256gcm:v1:0f1e2d3c4b5a6978:c2VhbGVkIGhhc2g"
	expires := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)
	var evs []domain.Event
	for i := range domain.MaxMembers {
		id, role := fmt.Sprintf("mem-%d", i), "member"
		if i == 0 {
			role = "owner"
		}
		evs = append(evs, domain.MemberJoined{AccountID: accountID, MemberID: id, Login: "login-" + id, Role: role, PasswordSealed: sealed})
		for j := range domain.MaxSessions {
			tok := fmt.Sprintf("s-%s-%d", id, j)
			evs = append(evs, domain.TokenIssued{AccountID: accountID, TokenID: tok, TokenHash: commands.HashToken(tok), Name: "browser session",
				ExpiresAt: expires, MemberID: id, Kind: domain.TokenKindSession})
		}
	}
	for i := range domain.MaxTokens - 1 {
		tok := fmt.Sprintf("t-%d", i)
		evs = append(evs, domain.TokenIssued{AccountID: accountID, TokenID: tok, TokenHash: commands.HashToken(tok), Name: "laptop"})
	}
	for len(evs) > 0 {
		n := min(len(evs), 500)
		e.appendChanges(t, domain.AccountStream(accountID), domain.Any(), evs[:n], accountID)
		evs = evs[n:]
	}
}

// wantInvalid fails unless err is INVALID_INPUT on field.
func wantInvalid(t *testing.T, what string, err error, field string) {
	t.Helper()
	var bad *domain.InvalidInputError
	if !errors.As(err, &bad) || bad.Field != field {
		t.Errorf("%s: error %v, want invalid %s", what, err, field)
	}
}

// TestAccountAtTheCapsReadsABoundedTail: an account at every cap refuses
// another member invite, a join into it and another API token; it still
// takes snapshots, and a command of it reads as much at 12 000 events as at
// 8 000 (a snapshot follows about every 3 600 events at the caps: three by
// 12 000): its tail, never its history.
func TestAccountAtTheCapsReadsABoundedTail(t *testing.T) {
	t.Parallel() // see newCountingEnv
	e, reads, _ := newCountingEnv(t, "")
	acc, _ := e.account(t, "full")
	stream := domain.AccountStream(acc.ID)
	fullAccount(t, e, acc.ID)
	// An invite made before the cap held, into the now full account.
	e.appendChanges(t, stream, domain.Any(), []domain.Event{domain.MemberInvited{AccountID: acc.ID, InviteID: "minv-old",
		CodeHash: commands.HashToken("rjn_old"), Role: "member", By: "mem-0",
		ExpiresAt: time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)}}, acc.ID)

	_, _, err := e.svc.InviteMember(ctx(t), acc.ID, "mem-0", domain.RoleMember, 0)
	wantInvalid(t, "createMemberInvite", err, "createMemberInvite")
	_, err = e.svc.JoinAccount(ctx(t), "rjn_old", "newcomer", "a long enough password")
	wantInvalid(t, "joinAccount", err, "joinAccount")
	_, _, err = e.svc.CreateToken(ctx(t), acc.ID, "one more", 0)
	wantInvalid(t, "createToken", err, "createToken")

	// The most a command reads: the last event, then windows of 512 back
	// to the newest snapshot, which is at most AccountSnapshotAfter events
	// plus one per entry (the caps' and the old invite), plus a batch
	// appended and the command's own events, behind.
	const batch = 400
	tail := domain.AccountSnapshotAfter + domain.MaxAccountEntries + 1 + batch + 2
	bound := int64(1 + 512*((tail+511)/512))
	roles := []domain.Role{domain.RoleOwner, domain.RoleMember}
	most := int64(0)
	for _, n := range []int{8_000, 12_000} {
		for i := 0; ; i++ {
			last, err := e.store.LastEvent(ctx(t), stream)
			if err != nil {
				t.Fatal(err)
			}
			if int(last.Revision)+1 >= n {
				break
			}
			var evs []domain.Event
			for j := range batch / 2 {
				id := fmt.Sprintf("churn-%d-%d", last.Revision, j)
				evs = append(evs, domain.TokenIssued{AccountID: acc.ID, TokenID: id, TokenHash: commands.HashToken(id), Name: "loop"},
					domain.TokenRevoked{AccountID: acc.ID, TokenID: id})
			}
			e.appendChanges(t, stream, domain.Any(), evs, acc.ID)
			reads.events.Store(0)
			if _, err := e.svc.ChangeMemberRole(ctx(t), acc.ID, "", "mem-1", roles[i%2]); err != nil {
				t.Fatalf("change a role at %d events: %v", last.Revision+1, err)
			}
			got := reads.events.Load()
			if got > bound {
				t.Fatalf("at %d events a command read %d, want at most %d", last.Revision+1, got, bound)
			}
			most = max(most, got)
		}
		recs, evs, err := domain.LoadStreamTail(ctx(t), e.store, e.codec, stream, domain.TypeAccountSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		snap, ok := evs[0].(domain.AccountSnapshot)
		if !ok {
			t.Fatalf("at %d events no snapshot: the stream's tail starts with %T", n, evs[0])
		}
		entries := len(snap.Tokens) + len(snap.Members) + len(snap.Invites)
		reads.events.Store(0)
		if _, err := e.svc.ChangeMemberRole(ctx(t), acc.ID, "", "mem-1", domain.RoleMember); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d events: the newest snapshot at revision %d holds %d entries (%d members); a command read %d events, at most %d so far (bound %d)",
			recs[len(recs)-1].Revision+1, recs[0].Revision, entries, len(snap.Members), reads.events.Load(), most, bound)
		if len(snap.Members) != domain.MaxMembers {
			t.Errorf("the newest snapshot holds %d members, want %d", len(snap.Members), domain.MaxMembers)
		}
	}
}
