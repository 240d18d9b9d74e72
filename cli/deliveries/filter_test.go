package deliveries

import (
	"maps"
	"testing"
	"time"

	"github.com/relayhq/relay/cli/cmdutil"
)

// TestListFilter: the flags of deliveries list become the query's filter;
// a flag the relay could not act on is a usage error (exit 2), not a
// filter that silently matches nothing.
func TestListFilter(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		f       listFlags
		want    map[string]any
		wantErr bool
	}{
		{name: "none", f: listFlags{}, want: nil},
		{name: "status", f: listFlags{status: "502"}, want: map[string]any{"status": 502}},
		{name: "class", f: listFlags{status: "5XX"}, want: map[string]any{"statusClass": 5}},
		{name: "pending", f: listFlags{status: "pending"}, want: map[string]any{"pending": true}},
		{name: "bad status", f: listFlags{status: "600"}, wantErr: true},
		{name: "since in days", f: listFlags{since: "1d", method: "post"},
			want: map[string]any{"receivedAfter": "2026-11-27T12:00:00Z", "method": "POST"}},
		{name: "until a time", f: listFlags{until: "2026-11-25T08:00:00Z"}, want: map[string]any{"receivedBefore": "2026-11-25T08:00:00Z"}},
		{name: "negative since", f: listFlags{since: "-1h"}, wantErr: true},
		{name: "path without slash", f: listFlags{path: "hook"}, wantErr: true},
		{name: "header with value", f: listFlags{header: "X-Sig=abc"}, want: map[string]any{"header": "X-Sig", "headerValue": "abc"}},
		{name: "header name with a colon", f: listFlags{header: "X-Sig:"}, wantErr: true},
		{name: "attempt status out of range", f: listFlags{attempt: 99}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.f.filter(now)
			if tt.wantErr {
				if cmdutil.ExitCode(err) != cmdutil.ExitRefused {
					t.Fatalf("filter = %v, %v; want a usage error", got, err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Errorf("filter = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestStatusMatches: a --status names an answered status, a class, or no
// answer yet.
func TestStatusMatches(t *testing.T) {
	n := func(v int) *int { return &v }
	tests := []struct {
		flag string
		st   *int
		want bool
	}{
		{"", nil, true}, {"", n(200), true},
		{"pending", nil, true}, {"pending", n(200), false},
		{"5xx", n(502), true}, {"5xx", n(404), false}, {"5xx", nil, false},
		{"502", n(502), true}, {"502", n(503), false},
	}
	for _, tt := range tests {
		f, err := parseStatus(tt.flag)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.matches(tt.st); got != tt.want {
			t.Errorf("--status %q matches %v = %v, want %v", tt.flag, tt.st, got, tt.want)
		}
	}
}
