//go:build linux

package systemtest

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestEndOfInputAnswersNo: a [Y/n] question answered by end of input
// (Ctrl-D on the terminal, before Enter) is a no, said as such: listen
// with no login on a terminal neither signs up an account nor starts a
// browser login, and stores nothing.
func TestEndOfInputAnswersNo(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h := newCLIHome(t)
	term, tty := openTerminal(t)
	// One Ctrl-D for each question: sign up here? log in through the browser?
	if _, err := term.Write([]byte{4, 4}); err != nil {
		t.Fatal(err)
	}
	c := h.command("")
	c.Stdin = tty
	c.Dir = t.TempDir()
	p := harness.StartWith(t, c, "listen", "3000", "--server", "http://127.0.0.1:"+fmt.Sprint(r.Port))
	harness.Eventually(t, 15*time.Second, "listen to end or log in", func() bool {
		return p.Exited() || strings.Contains(p.Output(), "logged in to")
	})
	out := p.Output()
	if strings.Count(out, "no answer (end of input): taken as no") != 2 || strings.Contains(out, "logged in to") {
		t.Errorf("listen on Ctrl-D, want two questions answered no and no login:\n%s", out)
	}
	if _, ok := h.stored(t); ok {
		t.Errorf("a login was stored on Ctrl-D:\n%s", out)
	}
}

// openTerminal opens a pseudo-terminal: what is written to term is what
// a user types on tty.
func openTerminal(t *testing.T) (term, tty *os.File) {
	t.Helper()
	term, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { term.Close() })
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, term.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pseudo-terminal number: %v", e)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, term.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock the pseudo-terminal: %v", e)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return term, tty
}
