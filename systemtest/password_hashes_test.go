package systemtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/secrets"
	"github.com/relayhq/relay/systemtest/harness"
)

// argonMarker begins every argon2id hash in PHC form.
const argonMarker = "$argon2id$"

const signInQuery = `mutation($l: String!, $p: String!){ signIn(login: $l, password: $p){ account{ id } member{ id } } }`

// signIn signs in with a password; the session is "" when refused.
func signIn(t *testing.T, r *harness.Relay, login, password string) (member, harness.GQLResult) {
	t.Helper()
	return passwordCall(t, r, signInQuery, map[string]any{"l": login, "p": password})
}

// eventsAnswers pages through the events query with token and returns
// every answer as it came.
func eventsAnswers(t *testing.T, r *harness.Relay, token string) []string {
	t.Helper()
	var answers []string
	after := ""
	for range 1000 { // far more pages than these tests write
		res := r.GraphQL(t, token, `query($a: String){ events(after: $a, first: 50){ nodes{ type data } pageInfo{ hasNextPage endCursor } } }`,
			map[string]any{"a": after})
		if len(res.Errors) > 0 {
			t.Fatalf("events: %s", res)
		}
		answers = append(answers, string(res.Data))
		var page struct {
			Events struct {
				PageInfo struct {
					HasNextPage bool
					EndCursor   string
				}
			}
		}
		if err := json.Unmarshal(res.Data, &page); err != nil {
			t.Fatal(err)
		}
		if !page.Events.PageInfo.HasNextPage {
			return answers
		}
		after = page.Events.PageInfo.EndCursor
	}
	t.Fatal("the events query never ended")
	return nil
}

// logExport is a running relay's GET /log/export with the admin token.
func logExport(t *testing.T, r *harness.Relay, adminToken string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.BareURL()+"/log/export", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /log/export: %d %v\n%.500s", resp.StatusCode, err, b)
	}
	return string(b)
}

// storedPasswords reads the members' stored passwords from a stopped
// relay's views file.
func storedPasswords(t *testing.T, dir string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "views.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT password_hash FROM members`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPasswordHashesNeverShown: an owner signs up, a member joins and
// changes their password. No answer of the events query (to the owner,
// to the operator's admin token), neither export (relay events export,
// GET /log/export), no line the relay wrote and no file of its data folder
// holds a password's argon2id hash: the log and the views keep it sealed
// under the secrets key, and the hashes the test opens from there are
// searched for, with the argon2id marker. Sign-in still works, with the
// new password only.
func TestPasswordHashesNeverShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const admin = "ops-secret-for-hashes"
	r := harness.Start(t, dir, "--admin-token", admin)
	owner := signUpMember(t, r, "Hashes", "owner@hashes.test", "the owner's long password")
	mate, res := joinMember(t, r, memberInvite(t, r, owner.Session), "mate@hashes.test", "the mate's first password")
	if len(res.Errors) > 0 {
		t.Fatalf("join: %s", res)
	}
	var changed struct{ ChangePassword bool }
	r.MustGraphQL(t, mate.Session, `mutation($c: String!, $n: String!){ changePassword(currentPassword: $c, newPassword: $n) }`,
		map[string]any{"c": "the mate's first password", "n": "the mate's second password"}, &changed)
	if !changed.ChangePassword {
		t.Fatal("changePassword answered false")
	}
	if m, res := signIn(t, r, "mate@hashes.test", "the mate's second password"); m.Session == "" {
		t.Fatalf("sign in with the new password: %s", res)
	}
	if m, _ := signIn(t, r, "mate@hashes.test", "the mate's first password"); m.Session != "" {
		t.Fatal("the old password still signs in")
	}

	shown := map[string]string{}
	for who, token := range map[string]string{"the owner": owner.Session, "the admin token": admin} {
		answers := eventsAnswers(t, r, token)
		all := strings.Join(answers, "\n")
		if !strings.Contains(all, domain.TypeMemberPasswordChanged) || !strings.Contains(all, domain.TypeMemberJoined) {
			t.Fatalf("the events answers to %s hold no member events: the search reads the wrong data\n%.2000s", who, all)
		}
		for i, a := range answers {
			shown["the events answer "+strconv.Itoa(i)+" to "+who] = a
		}
		for _, field := range []string{"password_hash", "password_sealed"} {
			if strings.Contains(all, field) {
				t.Errorf("the events answers to %s hold %s", who, field)
			}
		}
	}
	shown["GET /log/export"] = logExport(t, r, admin)
	r.Stop(t)
	shown["the relay's output"] = r.Output()
	export, code := harness.RunCLI(t, "events", "export", "--data", dir)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, export)
	}
	if !strings.Contains(export, domain.TypeMemberPasswordChanged) || !strings.Contains(export, "password_sealed") {
		t.Fatalf("the export holds no sealed password: the search reads the wrong data\n%.2000s", export)
	}
	shown["relay events export"] = export

	// The hashes themselves, opened from the views with the relay's key.
	keyFile, err := os.ReadFile(filepath.Join(dir, "secrets.key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := secrets.Parse(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	stored := storedPasswords(t, dir)
	if len(stored) != 2 {
		t.Fatalf("%d members in the views, want 2", len(stored))
	}
	needles := []string{argonMarker}
	for _, s := range stored {
		hash, err := key.Open(s)
		if err != nil || !strings.HasPrefix(hash, argonMarker) {
			t.Fatalf("the views keep %.40q…, which opens to %.20q (%v); want a sealed argon2id hash", s, hash, err)
		}
		needles = append(needles, hash, hash[strings.LastIndex(hash, "$")+1:]) // the whole hash, and its key alone
	}
	for where, text := range shown {
		for _, n := range needles {
			if strings.Contains(text, n) {
				t.Errorf("%s holds %.30q", where, n)
			}
		}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if strings.Contains(string(data), n) {
				t.Errorf("%s holds %.30q", path, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A relay given another secrets key (a node of a cluster with a key
	// of its own) cannot check a sealed password: it says so, in its log
	// with both key IDs, and to the person as UNAVAILABLE, not as a
	// wrong password.
	other := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(other, []byte(randomHex(t, 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := harness.Start(t, dir, "--secrets-key", other)
	m, res := signIn(t, o, "mate@hashes.test", "the mate's second password")
	if m.Session != "" || len(res.Errors) == 0 || res.Errors[0].Code() != "UNAVAILABLE" {
		t.Fatalf("a relay with another secrets key answered the sign-in with %s, want UNAVAILABLE", res)
	}
	o.Stop(t)
	if out := o.Output(); !strings.Contains(out, "another secrets key") || !strings.Contains(out, key.ID()) {
		t.Fatalf("the relay's log does not say the password was sealed under another key:\n%s", out)
	}
}

// TestPlainPasswordHashesOfOldLogs: a log written before hashes were
// sealed (member.joined.v1 and member.password_changed.v1 with a plain
// password_hash, appended with the domain's codec) still verifies, its
// member signs in, and the events query shows neither old hash. A new
// password is sealed; rebuilt views still sign in.
func TestPlainPasswordHashesOfOldLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	const login, first, second, third = "old@plain.test", "the first old password", "the second old password", "a password of the new kind"
	firstHash, err := commands.HashPassword(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	secondHash, err := commands.HashPassword(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	accountID, memberID := uuid.NewString(), uuid.NewString()
	s, err := app.OpenStore(ctx, dir, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	codec := domain.NewCodec()
	at := time.Now().Add(-time.Hour)
	appendOld := func(stream string, events ...domain.Event) {
		t.Helper()
		var data []domain.EventData
		for _, e := range events {
			d, err := codec.Encode(uuid.NewString(), e, at, domain.Trace{CorrelationID: accountID})
			if err != nil {
				t.Fatal(err)
			}
			data = append(data, d)
		}
		if _, err := s.Append(ctx, stream, domain.Any(), data...); err != nil {
			t.Fatalf("append to %s: %v", stream, err)
		}
	}
	appendOld(domain.LoginStream(domain.LoginKeyHash(login)), domain.LoginClaimed{AccountID: accountID, MemberID: memberID})
	appendOld(domain.AccountStream(accountID),
		domain.AccountCreated{AccountID: accountID, Name: "Old Team"},
		domain.MemberJoined{AccountID: accountID, MemberID: memberID, Login: login, Role: "owner", PasswordHash: firstHash},
		domain.MemberPasswordChanged{AccountID: accountID, MemberID: memberID, PasswordHash: secondHash})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	harness.Binary(t) // built before RunCLI's minute starts
	if out, _ := harness.RunCLI(t, "events", "export", "--data", dir); !strings.Contains(out, firstHash) || !strings.Contains(out, secondHash) {
		t.Fatal("the old log does not hold its plain hashes: the test writes the wrong data")
	}

	const admin = "ops-secret-for-old-logs"
	r := harness.Start(t, dir, "--admin-token", admin)
	if m, _ := signIn(t, r, login, first); m.Session != "" {
		t.Fatal("the password changed in the old log still signs in")
	}
	owner, res := signIn(t, r, login, second)
	if owner.Session == "" {
		t.Fatalf("the old log's member cannot sign in with their plain-hashed password: %s", res)
	}
	for who, token := range map[string]string{"the owner": owner.Session, "the admin token": admin} {
		all := strings.Join(eventsAnswers(t, r, token), "\n")
		if !strings.Contains(all, domain.TypeMemberPasswordChanged) {
			t.Fatalf("the events answers to %s hold no member events\n%.2000s", who, all)
		}
		for _, n := range []string{firstHash, secondHash, argonMarker, "password_hash"} {
			if strings.Contains(all, n) {
				t.Errorf("the events answers to %s hold %.30q", who, n)
			}
		}
	}
	var changed struct{ ChangePassword bool }
	r.MustGraphQL(t, owner.Session, `mutation($c: String!, $n: String!){ changePassword(currentPassword: $c, newPassword: $n) }`,
		map[string]any{"c": second, "n": third}, &changed)
	r.Stop(t)

	out, code := harness.RunCLI(t, "events", "verify", "--data", dir)
	if code != 0 {
		t.Fatalf("the old log with a sealed change after it does not verify: exit %d\n%s", code, out)
	}
	if out, code := harness.RunCLI(t, "events", "rebuild", "--data", dir); code != 0 {
		t.Fatalf("rebuild: exit %d\n%s", code, out)
	}
	for _, s := range storedPasswords(t, dir) {
		if strings.HasPrefix(s, argonMarker) || !strings.HasPrefix(s, "aes256gcm:") {
			t.Errorf("the rebuilt views keep %.30q…, want the sealed new hash", s)
		}
	}
	r.Restart(t)
	if m, res := signIn(t, r, login, third); m.Session == "" {
		t.Fatalf("rebuilt views do not sign in with the new password: %s", res)
	}
	if m, _ := signIn(t, r, login, second); m.Session != "" {
		t.Fatal("the old password still signs in after the change")
	}
}
