package systemtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/systemtest/harness"
)

// maxVerifyRSS is what relay events verify may hold at its peak while it
// refuses a hostile file: the largest limit (a proof, about 45 MiB) is
// refused from the file's size, an export line after about 27.5 MiB.
const maxVerifyRSS = 100 << 10 // KiB

// TestVerifyRefusesHostileFiles: files an auditor is handed, each far over
// what the relay writes, are refused by relay events verify with exit 2,
// naming the file (and the line) and the limit, at a peak RSS under
// 100 MiB: a 60 MiB proof, a 250 MiB export line (of a single chain, and of
// a chain per stream), a proof whose audit path is longer than a tree is
// high, a --checkpoint file and a checkpoint key over their bounds.
func TestVerifyRefusesHostileFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, err := evidence.LoadOrCreateKey(filepath.Join(dir, "checkpoint.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubkey := evidence.FormatPublicKey(key.Public().(ed25519.PublicKey))
	hash := `"` + strings.Repeat("ab", 32) + `"`
	good := `{"position":1,"id":"e","stream":"s","revision":0,"type":"t","data":{},"metadata":{}}` + "\n"

	proof := hostileFile(t, dir, "big.proof.json", `{"format":"relay-proof-v1","events":[{"data":"`, 'A', 60<<20, `"}]}`)
	export := hostileFile(t, dir, "line.jsonl", good+`{"position":2,"data":"`, 'A', 250<<20, `"}`+"\n")
	goodStream := `{"position":1,"id":"e","stream":"s","revision":0,"type":"t","data":{},"metadata":{},"chain":"stream","append":1}` + "\n"
	streamExport := hostileFile(t, dir, "stream.jsonl", goodStream+`{"position":2,"chain":"stream","data":"`, 'A', 250<<20, `"}`+"\n")
	path := hostileFile(t, dir, "path.proof.json", `{"format":"relay-proof-v1","events":[{"path":[`+strings.Repeat(hash+",", 64)+hash+`]}]}`, 0, 0, "")
	kept := hostileFile(t, dir, "kept.json", "", '\n', 2<<20, "")
	keyFile := hostileFile(t, dir, "big.key", "-----BEGIN PRIVATE KEY-----\n", 'A', 1<<20, "")

	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"a 60 MiB proof", []string{"events", "verify", "--proof", proof, "--pubkey", pubkey},
			[]string{proof + ": a proof over the limit of " + strconv.Itoa(evidence.MaxProofBytes) + " bytes"}},
		{"a 250 MiB export line", []string{"events", "verify", export, "--pubkey", pubkey},
			[]string{export + " line 2: an export line over the limit of " + strconv.Itoa(evidence.MaxExportLine) + " bytes"}},
		{"a 250 MiB line of a per-stream export", []string{"events", "verify", streamExport},
			[]string{streamExport + " line 2: an export line over the limit of " + strconv.Itoa(evidence.MaxExportLine) + " bytes"}},
		{"an audit path of 65 hashes", []string{"events", "verify", "--proof", path, "--pubkey", pubkey},
			[]string{path + ": an audit path over the limit of 64 entries"}},
		{"a 2 MiB --checkpoint file", []string{"events", "verify", export, "--checkpoint", "@" + kept},
			[]string{kept + ": the file over the limit of 1048576 bytes"}},
		{"a 1 MiB checkpoint key", []string{"events", "pubkey", "--checkpoint-key", keyFile},
			[]string{keyFile + ": the file over the limit of 65536 bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, code, peak := runMeasured(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (refused)", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q:\n%.2000s", w, out)
				}
			}
			t.Logf("peak RSS %d KiB", peak)
			if peak > maxVerifyRSS {
				t.Errorf("peak RSS %d KiB, over %d KiB", peak, maxVerifyRSS)
			}
		})
	}
}

// hostileFile writes head, n bytes of fill and tail to dir/name through a
// small buffer (the test holds none of it) and returns its path.
func hostileFile(t *testing.T, dir, name, head string, fill byte, n int64, tail string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(head)
	chunk := bytes.Repeat([]byte{fill}, 1<<20)
	for n > 0 {
		k := min(n, int64(len(chunk)))
		w.Write(chunk[:k])
		n -= k
	}
	w.WriteString(tail)
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return path
}

// runMeasured runs the relay binary and returns its output, its exit code
// and its peak resident set in KiB (the kernel's account of the child,
// getrusage's ru_maxrss).
func runMeasured(t *testing.T, args ...string) (string, int, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Through peakrss: the child's own ru_maxrss would count this test
	// process's memory too (see systemtest/harness/peakrss).
	report := filepath.Join(t.TempDir(), "peak")
	cmd := exec.CommandContext(ctx, harness.BinaryOf(t, "./systemtest/harness/peakrss"), append([]string{harness.Binary(t)}, args...)...)
	cmd.Env = append(os.Environ(), "PEAKRSS_OUT="+report)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run relay %v: %v", args, err)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("relay %v: no peak measured (%v): %s", args, err, out)
	}
	peak, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), cmd.ProcessState.ExitCode(), peak
}

// TestRetryRefusesABodyFileOverTheBound: `relay retry ID --body @FILE`
// with a file of 64 MiB, four times what any relay takes as a body, exits
// 2 before it calls the relay, naming the file and the bound (16 MiB), at
// a peak RSS under maxVerifyRSS (58 MiB). Before, the bound was 64 MiB:
// this file was refused at 181 MiB, and one of 64 MiB was read whole, its
// base64 and JSON built, for the relay to refuse (none takes over 16 MiB).
func TestRetryRefusesABodyFileOverTheBound(t *testing.T) {
	t.Parallel()
	body := hostileFile(t, t.TempDir(), "body.json", `{"a":"`, 'A', 64<<20, `"}`)
	out, code, peak := runMeasured(t, "retry", "0193a7c2-0000-7000-8000-000000000000", "--body", "@"+body,
		"--server", "http://127.0.0.1:1", "--token", "relay_unused")
	t.Logf("exit %d, peak RSS %d KiB: %.300s", code, peak, out)
	if code != 2 {
		t.Errorf("exit %d, want 2 (refused)", code)
	}
	if want := "--body @" + body + ": over 16 MiB"; !strings.Contains(out, want) {
		t.Errorf("output does not say %q:\n%.2000s", want, out)
	}
	if peak > maxVerifyRSS {
		t.Errorf("peak RSS %d KiB, over %d KiB", peak, maxVerifyRSS)
	}
}
