//go:build unix

package events

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/evidence"
)

// TestBlankReadsABoundedPrefix: relay events verify tells an empty export
// (nothing but white space) by reading at most an export line's bound of
// it: a longer run of white space is refused as a line over that bound,
// naming the file, the line and the limit. Before, the whole file was
// read a byte at a time (256 MiB of spaces from a pipe, any size from a
// file) and then called empty.
func TestBlankReadsABoundedPrefix(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "spaces")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	const total = 256 << 20
	written := make(chan int64, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			written <- -1
			return
		}
		defer f.Close()
		block := bytes.Repeat([]byte(" "), 64<<10)
		var n int64
		for n < total {
			m, err := f.Write(block)
			n += int64(m)
			if err != nil { // the reader is gone
				break
			}
		}
		written <- n
	}()
	isBlank := blank(fifo)
	n := <-written
	if isBlank {
		t.Errorf("%d MiB of spaces read as an empty export, want a first line over the bound", n>>20)
	}
	// What the pipe holds beyond what was read: its buffer and a block.
	if limit := int64(evidence.MaxExportLine) + 1<<20; n > limit {
		t.Errorf("read %d MiB of spaces to tell whether the file is empty, want at most %d MiB", n>>20, limit>>20)
	}
	t.Logf("the pipe took %.1f MiB of spaces", float64(n)/(1<<20))

	// A file of one line of spaces over the bound is refused as such, not
	// as empty.
	path := filepath.Join(dir, "spaces.jsonl")
	if err := os.WriteFile(path, bytes.Repeat([]byte(" "), evidence.MaxExportLine+1), 0o600); err != nil {
		t.Fatal(err)
	}
	err := verifyExport(context.Background(), path, evidence.Options{}, io.Discard)
	var le *evidence.LimitError
	if !errors.As(err, &le) || le.Line != 1 || !strings.Contains(err.Error(), path+" line 1") {
		t.Errorf("verify of a line of %d spaces = %v, want it refused as line 1 over the limit", evidence.MaxExportLine+1, err)
	}
	// A folder is refused as a usage error naming it.
	err = verifyExport(context.Background(), dir, evidence.Options{}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), dir+" is a folder") || cmdutil.ExitCode(err) != cmdutil.ExitRefused {
		t.Errorf("verify of a folder = %v, want a usage error naming it", err)
	}
	// Blank files stay empty ones.
	for _, s := range []string{"", "\n", " \n\t\r\n"} {
		p := filepath.Join(dir, "blank.jsonl")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if !blank(p) {
			t.Errorf("blank(%q) = false", s)
		}
	}
}
