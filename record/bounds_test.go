package record

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayhq/relay/domain"
)

// TestStoredResponseBounded: the log keeps the leading response headers
// that fit maxStoredText and counts the rest, and cuts an agent's error
// there, so that an event stays within what verify reads of a line.
func TestStoredResponseBounded(t *testing.T) {
	half := strings.Repeat("v", maxStoredText/2)
	for _, tt := range []struct {
		name    string
		in      []domain.Header
		kept    int
		dropped int
	}{
		{"none", nil, 0, 0},
		{"small", []domain.Header{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}, 2, 0},
		{"over the bound", []domain.Header{{Name: "A", Value: half}, {Name: "B", Value: half}, {Name: "C", Value: "x"}}, 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := storedHeaders(tt.in)
			if kept == nil || len(kept) != tt.kept || dropped != tt.dropped {
				t.Fatalf("kept %d (nil %v), dropped %d; want %d and %d", len(kept), kept == nil, dropped, tt.kept, tt.dropped)
			}
		})
	}
	long := strings.Repeat("é", maxStoredText) // two bytes each
	got := storedText(long)
	if len(got) > maxStoredText+len("…") || !utf8.ValidString(got) {
		t.Fatalf("storedText kept %d bytes (valid UTF-8: %v)", len(got), utf8.ValidString(got))
	}
	if storedText("short") != "short" {
		t.Fatal("a short error changed")
	}
}
