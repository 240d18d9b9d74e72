package termtext

import "testing"

func FuzzSafe(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31mred", "a\u202eb", "tab\there\nnewline", "\xff\xfe"} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, keepNewlines bool) {
		got := Safe(s, keepNewlines)
		for _, r := range got {
			if r == '\t' || (r == '\n' && keepNewlines) {
				continue
			}
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
				t.Fatalf("Safe(%q) = %q keeps %U", s, got, r)
			}
		}
	})
}

// TestSafeKeepsPlainText: text with nothing to escape comes back as it is,
// and text with something does not.
func TestSafeKeepsPlainText(t *testing.T) {
	for _, tt := range []struct {
		in, want     string
		keepNewlines bool
	}{
		{"/webhooks/stripe?x=1&y=%20", "/webhooks/stripe?x=1&y=%20", false},
		{"a\tb\nc", "a\tb\nc", true},
		{"a\nb", `a\x0ab`, false},
		{"\x1b[31m", `\x1b[31m`, true},
		{"\x7f", `\x7f`, true},
		{"caf\xc3\xa9", "café", false},
		{"\xff", "\uFFFD", false},
	} {
		if got := Safe(tt.in, tt.keepNewlines); got != tt.want {
			t.Errorf("Safe(%q, %v) = %q, want %q", tt.in, tt.keepNewlines, got, tt.want)
		}
	}
}
