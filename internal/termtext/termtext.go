// Package termtext makes text from webhook senders safe to print on a
// developer's terminal.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
)

// Safe escapes what a sender could use to drive the developer's
// terminal (escape sequences, other control characters) or to make text
// read other than it is (bidirectional overrides): a webhook's path,
// headers and body are anyone's bytes. Tabs stay, and newlines when
// keepNewlines.
func Safe(s string, keepNewlines bool) string {
	if plain(s, keepNewlines) {
		return s // the usual path: nothing to escape, nothing to copy
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t', r == '\n' && keepNewlines:
			b.WriteRune(r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// HasControl reports whether s holds a character Safe would escape.
func HasControl(s string) bool { return Safe(s, true) != s }

// plain reports whether s is printable ASCII, tabs and newlines when
// keepNewlines: text Safe returns as it is.
func plain(s string, keepNewlines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 || c > 0x7e) && c != '\t' && (c != '\n' || !keepNewlines) {
			return false
		}
	}
	return true
}
