package systemtest

import (
	"bytes"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/systemtest/harness"
)

// evidenceLog makes a data folder with a signed, chained log: an inspector
// with three deliveries, and checkpoints. It returns the folder (the relay
// stopped), the last checkpoint the verification printed, and the relay's
// public key.
func evidenceLog(t *testing.T) (dir, kept, pubkey string) {
	t.Helper()
	dir = t.TempDir()
	r := harness.Start(t, dir, "--checkpoint-interval", "200ms")
	id, _ := createInspector(t, r)
	// /a is small and stored as it came; /b and /c are large enough for
	// the log to store them compressed.
	lines := ""
	for _, p := range []string{"/a", "/b", "/c"} {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: p, Host: r.AddressHost(id), Body: []byte(`{"amount":1000,"p":"` + p + `"` + lines + `}`)})
		lines = `,"lines":[` + strings.Repeat(`{"amount":1200,"currency":"usd"},`, 40) + `{}]`
	}
	harness.Eventually(t, 10*time.Second, "three rows", func() bool { return len(history(t, r, id, 10)) == 3 })
	// A checkpoint covers the deliveries within the interval; the live
	// data folder verifies while the relay runs.
	harness.Eventually(t, 10*time.Second, "a checkpoint of the live log", func() bool {
		out, code := harness.RunCLI(t, "events", "verify", "--data", dir)
		return code == 0 && strings.Contains(out, "last checkpoint")
	})
	r.Stop(t) // signs the head once more
	out, code := harness.RunCLI(t, "events", "verify", "--data", dir)
	if code != 0 || !strings.Contains(out, "ok: ") || !strings.Contains(out, "checkpoint") {
		t.Fatalf("verify of an untouched log: exit %d\n%s", code, out)
	}
	_, line, ok := strings.Cut(out, "last checkpoint (keep it; verify --checkpoint checks a later log against it): ")
	if !ok {
		t.Fatalf("verify printed no checkpoint to keep:\n%s", out)
	}
	kept, _, _ = strings.Cut(line, "\n")
	pubkey, code = harness.RunCLI(t, "events", "pubkey", "--data", dir)
	if code != 0 || !strings.HasPrefix(pubkey, "ed25519:") {
		t.Fatalf("pubkey: exit %d %q", code, pubkey)
	}
	return dir, kept, strings.TrimSpace(pubkey)
}

// copyData copies a stopped relay's log into a fresh folder.
func copyData(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	for _, name := range []string{"events.db", "events.db-wal", "events.db-shm", "checkpoint.key"} {
		b, err := os.ReadFile(filepath.Join(from, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// openLog opens the log of a stopped relay's data folder for a test's own
// SQL; the caller closes it.
func openLog(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// tamper runs SQL statements on the log of a data folder.
func tamper(t *testing.T, dir string, stmts ...string) {
	t.Helper()
	db := openLog(t, dir)
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// position is the position of the first event matching where.
func position(t *testing.T, dir, where string) int64 {
	t.Helper()
	db := openLog(t, dir)
	defer db.Close()
	var p int64
	if err := db.QueryRow("SELECT position FROM events WHERE " + where + " ORDER BY position LIMIT 1").Scan(&p); err != nil {
		t.Fatalf("position where %s: %v", where, err)
	}
	return p
}

// TestTamperedLogIsNamed: each way of editing the embedded log behind the
// relay's back is caught by relay events verify, which exits 1 and names
// the first bad event and what is wrong with it.
func TestTamperedLogIsNamed(t *testing.T) {
	t.Parallel()
	dir, kept, _ := evidenceLog(t)
	received := position(t, dir, "type = 'delivery.received.v1'")
	second := position(t, dir, "type = 'delivery.received.v1' AND position > "+itoa(received))
	last := position(t, dir, "position = (SELECT MAX(position) FROM events)")
	forged := forgedCheckpoint(t, dir)
	if storedAs(t, dir, received) != 0 || storedAs(t, dir, second) != 1 {
		t.Fatalf("the first delivery is stored as %d and the second as %d: want one as given (0) and one compressed (1)", storedAs(t, dir, received), storedAs(t, dir, second))
	}

	for _, tt := range []struct {
		name  string
		stmts []string
		args  []string
		want  string // kind named
		at    int64  // position named first
	}{
		{"one body byte", []string{editBody(t, dir, received)}, nil, "data changed", received},
		{"a status in compressed data", []string{editData(t, dir, second, func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"status":204`), []byte(`"status":200`), 1)
		})}, nil, "data changed", second},
		{"an event deleted", []string{"DELETE FROM events WHERE position = " + itoa(received)}, nil, "event missing", received},
		// The link kept as retention keeps it, but no deletion of the stream recorded.
		{"an event deleted, its link kept", []string{"INSERT INTO removed_links SELECT position, stream, leaf, link FROM events WHERE position = " + itoa(received), "DELETE FROM events WHERE position = " + itoa(received)}, nil, "event missing", received},
		{"two events swapped", swap(received, second), nil, "events reordered", received},
		{"an event inserted", []string{`INSERT INTO events (id, stream, revision, type, data, metadata) VALUES ('11111111-1111-4111-8111-111111111111', 'delivery-forged', 0, 'delivery.received.v1', '{}', '{}')`}, nil, "event inserted", last + 1},
		{"the tail cut", []string{"DELETE FROM events WHERE position > " + itoa(received)}, []string{"--checkpoint", kept}, "log truncated after a checkpoint", 0},
		{"a forged checkpoint", forged, nil, "checkpoint signature invalid", last + 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := copyData(t, dir)
			tamper(t, d, tt.stmts...)
			out, code := harness.RunCLI(t, append([]string{"events", "verify", "--data", d}, tt.args...)...)
			if code != 1 {
				t.Fatalf("verify exited %d, want 1:\n%s", code, out)
			}
			first := firstProblem(out)
			if !strings.Contains(first, ": "+tt.want+": ") || tt.at > 0 && !strings.HasPrefix(first, "problem: position "+itoa(tt.at)+" ") &&
				!strings.HasPrefix(first, "problem: position "+itoa(tt.at)+":") {
				t.Fatalf("first problem %q, want %q at position %d; output:\n%s", first, tt.want, tt.at, out)
			}
		})
	}
}

// TestTamperedExportIsNamed: an export verifies offline with the public key
// alone, and edits of the file are named the same way.
func TestTamperedExportIsNamed(t *testing.T) {
	t.Parallel()
	dir, kept, pubkey := evidenceLog(t)
	out, code := harness.RunCLI(t, "events", "export", "--data", dir)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	write := func(t *testing.T, ls []string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if out, code := harness.RunCLI(t, "events", "verify", write(t, lines), "--pubkey", pubkey, "--checkpoint", kept); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify of an untouched export: exit %d\n%s", code, out)
	}
	body := -1
	for i, l := range lines {
		if strings.Contains(l, `"type":"delivery.received.v1"`) {
			body = i
			break
		}
	}
	edit := func(f func(ls []string) []string) []string { return f(append([]string(nil), lines...)) }
	otherKey := "ed25519:" + strings.Repeat("A", 43) + "="
	for _, tt := range []struct {
		name  string
		lines []string
		args  []string
		want  string
	}{
		{"one body byte", edit(func(ls []string) []string { ls[body] = flipBody(ls[body]); return ls }), nil, "data changed"},
		{"a line deleted", edit(func(ls []string) []string { return append(ls[:body], ls[body+1:]...) }), nil, "event missing"},
		{"two lines swapped", edit(func(ls []string) []string { ls[body], ls[body+1] = ls[body+1], ls[body]; return ls }), nil, "events reordered"},
		{"the tail cut", lines[:body+1], []string{"--checkpoint", kept}, "log truncated after a checkpoint"},
		{"another key", lines, []string{"--pubkey", otherKey}, "checkpoint signature invalid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"events", "verify", write(t, tt.lines)}
			if len(tt.args) == 0 || tt.args[0] != "--pubkey" {
				args = append(args, "--pubkey", pubkey)
			}
			out, code := harness.RunCLI(t, append(args, tt.args...)...)
			if code != 1 || !strings.Contains(firstProblem(out), ": "+tt.want+": ") {
				t.Fatalf("verify exited %d, want 1 naming %q first:\n%s", code, tt.want, out)
			}
		})
	}
}

func firstProblem(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "problem: ") {
			return l
		}
	}
	return ""
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// swap exchanges the contents of two events, keeping their positions.
func swap(a, b int64) []string {
	A, B := itoa(a), itoa(b)
	return []string{
		"CREATE TEMP TABLE s AS SELECT * FROM events WHERE position IN (" + A + "," + B + ")",
		"UPDATE events SET id = id || '-x', revision = revision + 1000000 WHERE position IN (" + A + "," + B + ")",
		"UPDATE events SET (id, stream, revision, type, data, enc, metadata) = (SELECT id, stream, revision, type, data, enc, metadata FROM s WHERE position = " + B + ") WHERE position = " + A,
		"UPDATE events SET (id, stream, revision, type, data, enc, metadata) = (SELECT id, stream, revision, type, data, enc, metadata FROM s WHERE position = " + A + ") WHERE position = " + B,
	}
}

// forgedCheckpoint appends a checkpoint signed by another key, chained as
// the relay's writer would chain it: only the signature can tell.
func forgedCheckpoint(t *testing.T, dir string) []string {
	t.Helper()
	db := openLog(t, dir)
	defer db.Close()
	var (
		pos, rev int64
		link     []byte
	)
	if err := db.QueryRow("SELECT position, link FROM events ORDER BY position DESC LIMIT 1").Scan(&pos, &link); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT MAX(revision) + 1 FROM events WHERE stream = 'log-checkpoints'").Scan(&rev); err != nil {
		t.Fatal(err)
	}
	var head evidence.Hash
	copy(head[:], link)
	key, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	forged := evidence.Head{Position: uint64(pos), Link: head, TreeSize: uint64(pos), Root: head}
	sig := evidence.Sign(key, forged)
	data, _ := json.Marshal(map[string]any{"position": pos, "link": head.String(), "tree_size": pos, "root": head.String(), "public_key": "ed25519:forged", "signature": sig})
	meta := []byte(`{"schema_version":1,"occurred_at":"2026-11-25T00:00:00Z"}`)
	e := evidence.Event{Position: uint64(pos + 1), ID: "22222222-2222-4222-8222-222222222222", Stream: "log-checkpoints", Revision: uint64(rev), Type: "log.checkpointed.v1", Data: data, Metadata: meta}
	leaf := evidence.Leaf(e)
	next := evidence.Link(head, leaf)
	q := func(b []byte) string { return "X'" + hexOf(b) + "'" }
	return []string{
		"INSERT INTO events (position, id, stream, revision, type, data, metadata, leaf, link) VALUES (" + itoa(pos+1) + ", '" + e.ID + "', 'log-checkpoints', " + itoa(rev) + ", 'log.checkpointed.v1', " + q(data) + ", " + q(meta) + ", " + q(leaf[:]) + ", " + q(next[:]) + ")",
	}
}

// flipBody changes one character of the first base64 body in s.
func flipBody(s string) string {
	i := strings.Index(s, `"body":"`)
	if i < 0 {
		panic("no body in " + s)
	}
	i += len(`"body":"`)
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// editBody is the statement that changes one byte of the body of the event
// at position pos.
func editBody(t *testing.T, dir string, pos int64) string {
	t.Helper()
	return editData(t, dir, pos, func(b []byte) []byte { return []byte(flipBody(string(b))) })
}

// editData is the statement that stores edit's change to the data of the
// event at position pos, kept as the row keeps it (raw, or compressed as
// the log compresses: enc 1 is s2).
func editData(t *testing.T, dir string, pos int64, edit func([]byte) []byte) string {
	t.Helper()
	db := openLog(t, dir)
	defer db.Close()
	var (
		stored []byte
		enc    int
	)
	if err := db.QueryRow("SELECT data, enc FROM events WHERE position = ?", pos).Scan(&stored, &enc); err != nil {
		t.Fatal(err)
	}
	data := stored
	if enc == 1 {
		var err error
		if data, err = s2.Decode(nil, stored); err != nil {
			t.Fatal(err)
		}
	}
	edited := edit(bytes.Clone(data))
	if bytes.Equal(edited, data) {
		t.Fatalf("the edit changes nothing in the event at %d: %s", pos, data)
	}
	if enc == 1 {
		edited = s2.Encode(nil, edited)
	}
	return "UPDATE events SET data = X'" + hexOf(edited) + "' WHERE position = " + itoa(pos)
}

// storedAs is how the log stores the data of the event at position pos
// (its enc column: 0 as given, 1 compressed).
func storedAs(t *testing.T, dir string, pos int64) int {
	t.Helper()
	db := openLog(t, dir)
	defer db.Close()
	var enc int
	if err := db.QueryRow("SELECT enc FROM events WHERE position = ?", pos).Scan(&enc); err != nil {
		t.Fatal(err)
	}
	return enc
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	var out bytes.Buffer
	for _, c := range b {
		out.WriteByte(digits[c>>4])
		out.WriteByte(digits[c&15])
	}
	return out.String()
}

// TestDeliveryProof: relay events prove writes a proof of one delivery
// that verify --proof accepts with the public key alone, and refuses when
// the proof's event, path or checkpoint is changed or the key is another.
func TestDeliveryProof(t *testing.T) {
	t.Parallel()
	dir, _, pubkey := evidenceLog(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	var stream string
	err = db.QueryRow("SELECT stream FROM events WHERE type = 'delivery.received.v1' ORDER BY position LIMIT 1").Scan(&stream)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimPrefix(stream, "delivery-")
	proof, code := harness.RunCLI(t, "events", "prove", id, "--data", dir)
	if code != 0 {
		t.Fatalf("prove: exit %d\n%s", code, proof)
	}
	var p evidence.Proof
	if err := json.Unmarshal([]byte(proof), &p); err != nil || len(p.Events) == 0 || p.Checkpoint.TreeSize == 0 {
		t.Fatalf("prove wrote %v:\n%s", err, proof)
	}
	write := func(p evidence.Proof) string {
		t.Helper()
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "proof.json")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	good := filepath.Join(t.TempDir(), "delivery.proof.json")
	if err := os.WriteFile(good, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := harness.RunCLI(t, "events", "verify", "--proof", good, "--pubkey", pubkey)
	if code != 0 || !strings.Contains(out, "ok: ") || !strings.Contains(out, "delivery.received.v1") {
		t.Fatalf("verify --proof of an untouched proof: exit %d\n%s", code, out)
	}

	other, err := evidence.LoadOrCreateKey(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	otherKey := evidence.FormatPublicKey(other.Public().(ed25519.PublicKey))
	clone := func() evidence.Proof {
		var c evidence.Proof
		if err := json.Unmarshal([]byte(proof), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tt := range []struct {
		name string
		edit func(p *evidence.Proof)
		key  string
		want string
	}{
		{"a body byte", func(p *evidence.Proof) { p.Events[0].Data = []byte(flipBody(string(p.Events[0].Data))) }, pubkey, "does not lead"},
		{"a path hash", func(p *evidence.Proof) { p.Events[0].Path[0] = strings.Repeat("0", 64) }, pubkey, "does not lead"},
		{"another leaf index", func(p *evidence.Proof) { p.Events[0].LeafIndex++ }, pubkey, "does not lead"},
		{"the checkpoint's root", func(p *evidence.Proof) { p.Checkpoint.Root = strings.Repeat("1", 64) }, pubkey, "not signed by this key"},
		{"another key", func(p *evidence.Proof) {}, otherKey, "not signed by this key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := clone()
			tt.edit(&c)
			out, code := harness.RunCLI(t, "events", "verify", "--proof", write(c), "--pubkey", tt.key)
			if code != 1 || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, want 1 naming %q:\n%s", code, tt.want, out)
			}
		})
	}
	if out, code := harness.RunCLI(t, "events", "prove", "no-such-delivery", "--data", dir); code != 1 || !strings.Contains(out, "no delivery") {
		t.Fatalf("prove of an unknown delivery: exit %d\n%s", code, out)
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--proof", good); code != 2 || !strings.Contains(out, "--pubkey") {
		t.Fatalf("verify --proof without a key: exit %d\n%s", code, out)
	}
}

// TestVerifyARunningRelay: relay events verify --server downloads a running
// relay's log with the admin token and checks its chain and checkpoints
// against the public key; a wrong token is refused, and a relay without an
// admin token serves no export.
func TestVerifyARunningRelay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := harness.Start(t, dir, "--checkpoint-interval", "200ms", "--admin-token", "ops-secret")
	server := r.BareURL()
	id, _ := createInspector(t, r)
	for _, p := range []string{"/a", "/b"} {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: p, Host: r.AddressHost(id), Body: []byte(`{"p":"` + p + `"}`)})
	}
	pubkey, code := harness.RunCLI(t, "events", "pubkey", "--data", dir)
	if code != 0 {
		t.Fatalf("pubkey: exit %d %s", code, pubkey)
	}
	pubkey = strings.TrimSpace(pubkey)
	harness.Eventually(t, 10*time.Second, "a verified checkpoint over both deliveries", func() bool {
		out, code := harness.RunCLI(t, "events", "verify", "--server", server, "--admin-token", "ops-secret", "--pubkey", pubkey)
		return code == 0 && strings.Contains(out, "last checkpoint") && !strings.Contains(out, "not checked") && strings.Contains(out, "ok: ")
	})
	if out, code := harness.RunCLI(t, "events", "verify", "--server", server, "--admin-token", "guess", "--pubkey", pubkey); code != 2 || !strings.Contains(out, "refused the admin token") {
		t.Fatalf("a wrong token: exit %d\n%s", code, out)
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--server", server, "--pubkey", pubkey); code != 2 || !strings.Contains(out, "--admin-token") {
		t.Fatalf("no token: exit %d\n%s", code, out)
	}
	plain := harness.Start(t, "")
	if out, code := harness.RunCLI(t, "events", "verify", "--server", plain.BareURL(), "--admin-token", "x"); code != 1 || !strings.Contains(out, "serves no log export") {
		t.Fatalf("a relay without an admin token: exit %d\n%s", code, out)
	}
}

// TestProofOfAProxiedDelivery: a log whose proxied deliveries are recorded
// as one event each (the receipt with the agent's answer in it, when the
// answer came within the receipt's hold) verifies, and `events prove`
// proves such a delivery: one event, its request and its answer, under a
// signed checkpoint.
func TestProofOfAProxiedDelivery(t *testing.T) {
	t.Parallel()
	p := startProxyRig(t, echoPath, false, "--checkpoint-interval", "200ms")
	var id string
	// An echo process answers well within the hold; a machine busy enough
	// to hold it back past the hold makes two events, so try a few.
	for i := 0; id == "" && i < 6; i++ {
		path := fmt.Sprintf("/proved-%d", i)
		if !p.forwardOK(t, path) {
			t.Fatalf("forward of %s failed", path)
		}
		d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, path)
		var mine []logEvent
		for _, e := range logEvents(t, p.r, p.acct.Token) {
			if e.Stream == "delivery-"+d.ID {
				mine = append(mine, e)
			}
		}
		if _, inReceipt, _ := answerEvent(t, mine); inReceipt && len(mine) == 1 {
			id = d.ID
		}
	}
	if id == "" {
		t.Fatal("none of six proxied deliveries was recorded as one event")
	}
	dir := p.r.Data
	harness.Eventually(t, 10*time.Second, "a checkpoint over the delivery", func() bool {
		out, code := harness.RunCLI(t, "events", "verify", "--data", dir)
		return code == 0 && strings.Contains(out, "last checkpoint")
	})
	p.r.Stop(t)
	if out, code := harness.RunCLI(t, "events", "verify", "--data", dir); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify of a log of proxied deliveries: exit %d\n%s", code, out)
	}
	pubkey, code := harness.RunCLI(t, "events", "pubkey", "--data", dir)
	if code != 0 {
		t.Fatalf("pubkey: exit %d %s", code, pubkey)
	}
	proof, code := harness.RunCLI(t, "events", "prove", id, "--data", dir)
	if code != 0 {
		t.Fatalf("prove: exit %d\n%s", code, proof)
	}
	var pr evidence.Proof
	if err := json.Unmarshal([]byte(proof), &pr); err != nil || len(pr.Events) != 1 || pr.Events[0].Type != "delivery.received.v1" {
		t.Fatalf("proof of a delivery recorded as one event: %v, events %+v", err, pr.Events)
	}
	f := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(f, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := harness.RunCLI(t, "events", "verify", "--proof", f, "--pubkey", strings.TrimSpace(pubkey)); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify --proof: exit %d\n%s", code, out)
	}
}
