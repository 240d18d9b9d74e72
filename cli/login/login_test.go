package login

import (
	"runtime"
	"strings"
	"testing"

	"github.com/relayhq/relay/cli/cmdutil"
)

// endless is a stream of one byte that never ends, counting what is read.
type endless struct {
	b    byte
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.b
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestTokenOnStandardInputIsBounded: relay login takes a token from
// standard input's first line of at most maxTokenInput bytes. A longer
// one (a file piped in by mistake, or a stream that never ends) is a
// usage error naming the bound, having read no more than the bound and a
// byte; it was cut at 4 KiB without a word and sent to the relay as a
// token.
func TestTokenOnStandardInputIsBounded(t *testing.T) {
	in := &endless{b: 'a'}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tok, err := readToken(in)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "over 4 KiB") || cmdutil.ExitCode(err) != cmdutil.ExitRefused {
		t.Fatalf("readToken = %d bytes, %v; want a usage error naming the 4 KiB bound", len(tok), err)
	}
	if in.read > maxTokenInput+1 {
		t.Errorf("read %d bytes of standard input, want at most %d", in.read, maxTokenInput+1)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Errorf("refusing the input allocated %d KiB, want at most 256", n>>10)
	} else {
		t.Logf("refused having read %d bytes and allocated %d KiB", in.read, n>>10)
	}

	// At the bound, with or without its newline, and with more lines
	// after it, the first line is the token.
	long := strings.Repeat("t", maxTokenInput)
	for _, s := range []string{long, long + "\n", "tok\r\n", " " + long[1:] + "\nmore\n", "tok\n" + strings.Repeat("x", 1<<20)} {
		got, err := readToken(strings.NewReader(s))
		want, _, _ := strings.Cut(s, "\n")
		if want = strings.TrimSpace(want); err != nil || got != want {
			t.Errorf("readToken(%d bytes) = %d bytes, %v; want %d bytes", len(s), len(got), err, len(want))
		}
	}
	if _, err := readToken(strings.NewReader(long + "x")); err == nil {
		t.Errorf("readToken(a line of %d bytes) took it", maxTokenInput+1)
	}
}
