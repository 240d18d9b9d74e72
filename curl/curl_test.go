package curl

import (
	"os/exec"
	"strings"
	"testing"
)

func TestCurlCommand(t *testing.T) {
	tests := []struct {
		name, method, path string
		headers            []Header
		body               string
		size               int
		want, notWant      []string
	}{
		{
			name: "body and repeated headers", method: "POST", path: "/hook?x=1",
			headers: []Header{{"Host", "a.localhost"}, {"X-Sig", "1"}, {"X-Sig", "2"}, {"Content-Length", "3"}, {"Content-Type", "text/plain"}},
			body:    "YWJj", size: 3,
			want: []string{
				"printf '%s' 'YWJj' | base64 -d | curl",
				"-X 'POST' 'http://a.localhost:8080/hook?x=1'",
				"-H 'X-Sig: 1' \\\n  -H 'X-Sig: 2'",
				"-H 'User-Agent:'", "-H 'Accept:'", "-H 'Expect:'", "--data-binary @-",
			},
			notWant: []string{"Host:", "Content-Length", "'Content-Type:'"},
		},
		{
			name: "no body", method: "GET", path: "/a/../b[1]",
			want:    []string{"--path-as-is", "--globoff 'http://a.localhost:8080/a/../b[1]'"},
			notWant: []string{"base64", "--data-binary", "Expect"},
		},
		{name: "head", method: "HEAD", path: "/", want: []string{"--head"}, notWant: []string{"-X"}},
		{name: "empty value", method: "GET", path: "/", headers: []Header{{"X-Empty", ""}}, want: []string{"-H 'X-Empty;'"}},
		{name: "quote in value", method: "GET", path: "/", headers: []Header{{"X-Q", "it's $(rm -rf /)"}}, want: []string{`-H 'X-Q: it'\''s $(rm -rf /)'`}},
	}
	for _, tt := range tests {
		got := Command(tt.method, "http://a.localhost:8080/", tt.path, tt.headers, tt.body, tt.size)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %s\nlacks %q", tt.name, got, w)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(got, w) {
				t.Errorf("%s: %s\nhas %q", tt.name, got, w)
			}
		}
	}
}

// FuzzShellQuote: whatever the bytes (but NUL, which no argument holds),
// the shell reads a quoted string back as exactly those bytes.
func FuzzShellQuote(f *testing.F) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		f.Skip("no sh")
	}
	for _, s := range []string{"", "'", `'\''`, "$(id)", "`id`", "a\nb", "\\", "\xff\xfe", "!$HOME"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return
		}
		out, err := exec.Command(sh, "-c", "printf '%s' "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Fatalf("sh read %q back as %q (%v)", s, out, err)
		}
	})
}
