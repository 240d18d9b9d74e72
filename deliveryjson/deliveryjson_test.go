package deliveryjson

import (
	"encoding/base64"
	"testing"
)

// TestExactText: the API's bytes win over its text when it sends them; a
// value that does not decode leaves the text.
func TestExactText(t *testing.T) {
	raw := base64.StdEncoding.EncodeToString([]byte("/p\xff"))
	bad := "%%%"
	tests := []struct {
		text string
		raw  *string
		want string
	}{
		{"/p", nil, "/p"},
		{"/p\uFFFD", &raw, "/p\xff"},
		{"/p", &bad, "/p"},
	}
	for _, tt := range tests {
		if got := ExactText(tt.text, tt.raw); got != tt.want {
			t.Errorf("ExactText(%q, %v) = %q, want %q", tt.text, tt.raw, got, tt.want)
		}
	}
}

// TestIncompleteText: what of a request is not stored, said once for the
// body and once for the headers, and nothing for a whole one.
func TestIncompleteText(t *testing.T) {
	body := base64.StdEncoding.EncodeToString(make([]byte, 1024))
	tests := []struct {
		name string
		d    Export
		want string
	}{
		{"whole", Export{Complete: true}, ""},
		{"body cut", Export{BodyBase64: body, BodySize: 4096}, "body stored 1.0 KiB of 4.0 KiB (incomplete)"},
		{"body refused", Export{BodyBase64: body, BodySize: 4096, BodyUnread: true},
			"body stored 1.0 KiB of 4.0 KiB (incomplete: refused over the relay's --max-body, read no further)"},
		{"headers dropped", Export{Complete: true, DroppedHeaders: 2}, "2 header values over the relay's header limits not stored"},
	}
	for _, tt := range tests {
		if got := tt.d.IncompleteText(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestFidelityString: the verdict as deliveries show prints it; a status
// this program does not know is printed safely, not dropped.
func TestFidelityString(t *testing.T) {
	tests := []struct {
		f    Fidelity
		want string
	}{
		{Fidelity{Status: "IDENTICAL"}, "identical"},
		{Fidelity{Status: "DIFFERENT", Differences: []string{"REQUEST_LINE", "BODY"}}, "different: request line, body"},
		{Fidelity{}, "not reported"},
		{Fidelity{Status: "NEW\x1b[2J"}, "NEW\\x1b[2J"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.f, got, tt.want)
		}
	}
}
