package commands_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
)

func TestCreateInspectorReadsItsOwnWrite(t *testing.T) {
	e := newEnv(t, defaultConfig())
	seen := map[string]bool{}
	for range 20 {
		before := time.Now().Add(-time.Millisecond)
		in, err := e.svc.CreateInspector(ctx(t))
		if err != nil {
			t.Fatalf("create inspector: %v", err)
		}
		// Read-your-writes: the views already hold everything the log does.
		if last, pos := e.lastPosition(t), e.views.Position(); pos < last {
			t.Fatalf("views at %d after CreateInspector returned, log at %d", pos, last)
		}
		got, err := e.views.Inspector(ctx(t), in.ID)
		if err != nil {
			t.Fatalf("read inspector %s back: %v", in.ID, err)
		}
		if got != in {
			t.Errorf("views hold %+v, CreateInspector returned %+v", got, in)
		}
		if err := domain.ValidateAddressID(in.ID); err != nil || len(in.ID) != 16 {
			t.Errorf("id %q is not a 16-character hostname label: %v", in.ID, err)
		}
		if seen[in.ID] {
			t.Fatalf("id %q returned twice", in.ID)
		}
		seen[in.ID] = true
		if in.TTL != time.Hour || in.Expired || in.CreatedAt.Before(before) || !in.ExpiresAt.Equal(in.CreatedAt.Add(time.Hour)) {
			t.Errorf("inspector %+v: want a live inspector with a one-hour TTL created now", in)
		}
		_, events := e.stream(t, domain.InspectorStream(in.ID))
		want := domain.InspectorCreated{InspectorID: in.ID, IdleTTLMs: time.Hour.Milliseconds()}
		if len(events) != 1 || events[0] != want {
			t.Errorf("inspector stream holds %+v, want [%+v]", events, want)
		}
	}
}

func TestCreateInspectorRefusesAnInvalidTTL(t *testing.T) {
	for _, ttl := range []time.Duration{0, -time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			cfg := defaultConfig()
			cfg.InspectorTTL = ttl
			e := newEnv(t, cfg)
			_, err := e.svc.CreateInspector(ctx(t))
			var inv *domain.InvalidInputError
			if !errors.As(err, &inv) || inv.Field != "ttl" {
				t.Fatalf("err = %v, want an invalid ttl", err)
			}
			if last := e.lastPosition(t); last != 0 {
				t.Fatalf("the log holds %d events, want none", last)
			}
		})
	}
}

func TestSignUpAndAuthenticate(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, adaToken, err := e.svc.SignUp(ctx(t), "  Ada  ", "", "")
	if err != nil {
		t.Fatalf("sign up: %v", err)
	}
	if _, err := uuid.Parse(ada.ID); err != nil || ada.Name != "Ada" {
		t.Fatalf("account %+v: want a UUID id and the trimmed name", ada)
	}
	if got, err := e.views.Account(ctx(t), ada.ID); err != nil || got != ada {
		t.Fatalf("views hold %+v (%v), SignUp returned %+v", got, err, ada)
	}
	bob, bobToken := e.account(t, "Bob")
	if adaToken == bobToken {
		t.Fatal("two accounts got the same token")
	}
	for _, tc := range []struct {
		token string
		want  string
	}{{adaToken, ada.ID}, {bobToken, bob.ID}} {
		got, err := e.svc.Authenticate(ctx(t), tc.token)
		if err != nil || got.ID != tc.want {
			t.Errorf("Authenticate(%.8s…) = %+v, %v; want account %s", tc.token, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"empty", ""},
		{"unknown", "rly_" + strings.Repeat("a", 52)},
		{"truncated", adaToken[:len(adaToken)-1]},
		{"extended", adaToken + "a"},
		{"upper case", strings.ToUpper(adaToken)},
		{"with space", adaToken + " "},
		{"without prefix", strings.TrimPrefix(adaToken, "rly_")},
		{"its hash", commands.HashToken(adaToken)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.svc.Authenticate(ctx(t), tc.token)
			if !errors.Is(err, domain.ErrUnauthenticated) {
				t.Fatalf("Authenticate = %+v, %v; want ErrUnauthenticated", got, err)
			}
		})
	}
}

func TestAuthenticateRefusesARevokedToken(t *testing.T) {
	e := newEnv(t, defaultConfig())
	acc, first := e.account(t, "Ada")

	// Issue a second token, then revoke the first, as an operator would.
	recs, events := e.stream(t, domain.AccountStream(acc.ID))
	var firstID string
	for _, ev := range events {
		if ti, ok := ev.(domain.TokenIssued); ok {
			firstID = ti.TokenID
		}
	}
	if firstID == "" {
		t.Fatalf("no TokenIssued in %+v", events)
	}
	a := domain.LoadAccount(events)
	second, secondHash := commands.NewToken()
	if err := a.IssueToken(commands.NewEventID(), secondHash, "laptop", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeToken(firstID); err != nil {
		t.Fatal(err)
	}
	e.appendChanges(t, domain.AccountStream(acc.ID), domain.Exact(recs[len(recs)-1].Revision), a.Changes(), acc.ID)

	if got, err := e.svc.Authenticate(ctx(t), first); !errors.Is(err, domain.ErrUnauthenticated) {
		t.Errorf("revoked token: %+v, %v; want ErrUnauthenticated", got, err)
	}
	if got, err := e.svc.Authenticate(ctx(t), second); err != nil || got.ID != acc.ID {
		t.Errorf("second token: %+v, %v; want account %s", got, err, acc.ID)
	}
}

func TestSignUpRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		open      bool
		account   string
		wantField string
	}{
		{"closed", false, "Ada", "signUp"},
		{"empty name", true, "", "name"},
		{"blank name", true, " \t ", "name"},
		{"long name", true, strings.Repeat("a", 101), "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.SignupOpen = tc.open
			e := newEnv(t, cfg)
			_, token, err := e.svc.SignUp(ctx(t), tc.account, "", "")
			var inv *domain.InvalidInputError
			if !errors.As(err, &inv) || inv.Field != tc.wantField {
				t.Fatalf("err = %v, want invalid %s", err, tc.wantField)
			}
			if token != "" {
				t.Errorf("a refused sign-up returned a token")
			}
			if last := e.lastPosition(t); last != 0 {
				t.Errorf("the log holds %d events, want none", last)
			}
		})
	}
}

func TestCreateAccountWorksWhenSignUpIsClosed(t *testing.T) {
	cfg := defaultConfig()
	cfg.SignupOpen = false
	e := newEnv(t, cfg)
	acc, token := e.account(t, "Operator-made")
	if got, err := e.svc.Authenticate(ctx(t), token); err != nil || got.ID != acc.ID {
		t.Fatalf("Authenticate = %+v, %v; want %s", got, err, acc.ID)
	}
}

// TestTokensNeverReachTheLog searches every event's payload and envelope,
// then every file the relay wrote, for the tokens it handed out.
func TestTokensNeverReachTheLog(t *testing.T) {
	e := newEnv(t, defaultConfig())
	tokens := map[string]string{} // token → its hash
	for _, name := range []string{"Ada", "Bob", "Cy"} {
		_, token, err := e.svc.SignUp(ctx(t), name, "", "")
		if err != nil {
			t.Fatal(err)
		}
		tokens[token] = commands.HashToken(token)
	}
	events := e.allEvents(t)
	hashes := 0
	for _, ev := range events {
		meta, err := json.Marshal(ev.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		fields := map[string][]byte{"data": ev.Data, "metadata": meta, "id": []byte(ev.ID), "type": []byte(ev.Type), "stream": []byte(ev.Stream)}
		for token, hash := range tokens {
			for name, f := range fields {
				if bytes.Contains(f, []byte(token)) || bytes.Contains(f, []byte(strings.TrimPrefix(token, "rly_"))) {
					t.Errorf("the %s of event %s (%s) holds a token in clear", name, ev.ID, ev.Type)
				}
			}
			if bytes.Contains(ev.Data, []byte(hash)) {
				hashes++
			}
		}
	}
	// The search looked where the token would be: the hashes are there.
	if hashes != len(tokens) {
		t.Fatalf("found %d token hashes in %d events, want %d", hashes, len(events), len(tokens))
	}
	files, err := filepath.Glob(filepath.Join(e.dir, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("list data files: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for token := range tokens {
			if bytes.Contains(b, []byte(token)) {
				t.Errorf("%s holds a token in clear", filepath.Base(f))
			}
		}
	}
}

// TestSignUpByInvite: on an invite relay, sign-up needs an invite, which
// creates one account only; a bad name does not spend it.
func TestSignUpByInvite(t *testing.T) {
	cfg := defaultConfig()
	cfg.Signup = domain.SignupInvite
	e := newEnv(t, cfg)
	inviter, _ := e.account(t, "Ada")
	for _, code := range []string{"", "rin_nope"} {
		_, token, err := e.svc.SignUp(ctx(t), "Bob", code, "")
		var inv *domain.InvalidInputError
		if !errors.As(err, &inv) || inv.Field != "invite" || token != "" {
			t.Fatalf("sign-up with invite %q: %v, want invalid invite", code, err)
		}
	}
	code, expires, err := e.svc.CreateInvite(ctx(t), inviter.ID, 0)
	if err != nil || !strings.HasPrefix(code, "rin_") || time.Until(expires) < 6*24*time.Hour {
		t.Fatalf("CreateInvite = %q, %v, %v", code, expires, err)
	}
	if _, _, err := e.svc.SignUp(ctx(t), " ", code, ""); err == nil {
		t.Fatal("a blank name signed up")
	}
	bob, token, err := e.svc.SignUp(ctx(t), "Bob", code, "")
	if err != nil || token == "" || bob.Name != "Bob" {
		t.Fatalf("sign-up with the invite: %+v, %v", bob, err)
	}
	if _, _, err := e.svc.SignUp(ctx(t), "Carol", code, ""); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("the invite signed up a second account: %v", err)
	}
	if _, _, err := e.svc.CreateInvite(ctx(t), inviter.ID, 8*24*time.Hour); err == nil {
		t.Fatal("an invite longer than 7d was made")
	}
}
