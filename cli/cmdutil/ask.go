package cmdutil

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// maxAnswer bounds what a yes/no answer reads from the terminal.
const maxAnswer = 256

// Ask puts a yes/no question on the terminal and reports a yes (Enter is
// yes). Without a terminal on stdin nothing is asked and the answer is no:
// a script says what it wants with a flag. End of input (Ctrl-D) before
// Enter is no, said on w: nothing is done on an answer never given.
func Ask(stdin io.Reader, w io.Writer, question string) bool {
	if !CanAsk(stdin) {
		return false
	}
	return answer(stdin, w, question)
}

// answer asks question on w and reads the answer from r: Enter alone, y or
// yes is a yes; anything else, and end of input, is no.
func answer(r io.Reader, w io.Writer, question string) bool {
	fmt.Fprintf(w, "%s [Y/n] ", question)
	// One byte at a time: what follows the line stays unread.
	var line []byte
	b := make([]byte, 1)
	ended := false
	for len(line) < maxAnswer {
		n, err := r.Read(b)
		if n == 0 || err != nil {
			break
		}
		if b[0] == '\n' {
			ended = true
			break
		}
		line = append(line, b[0])
	}
	if !ended && len(line) < maxAnswer {
		fmt.Fprintln(w, "\nno answer (end of input): taken as no")
		return false
	}
	switch strings.ToLower(strings.TrimSpace(string(line))) {
	case "", "y", "yes":
		return true
	}
	return false
}

// CanAsk reports whether r is a terminal someone types answers into. A
// character device is not enough (isTerminal's test): /dev/null is one,
// and a script's standard input often is it.
func CanAsk(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}
