package graph

import (
	"errors"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestRedriveCursor: redriveDeadPage's after is a position it returned, or
// nothing; anything else, however long, is INVALID_INPUT naming after.
func TestRedriveCursor(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		in   *string
		want uint64
		bad  bool
	}{
		{nil, 0, false},
		{str(""), 0, false},
		{str("1234"), 1234, false},
		{str("18446744073709551615"), 18446744073709551615, false},
		{str("18446744073709551616"), 0, true},
		{str("-1"), 0, true},
		{str("c1"), 0, true},
		{str(strings.Repeat("9", 1<<20)), 0, true},
	} {
		got, err := redriveCursor(tc.in)
		var invalid *domain.InvalidInputError
		if tc.bad {
			if !errors.As(err, &invalid) || invalid.Field != "after" {
				t.Errorf("cursor of %d bytes: %v, want INVALID_INPUT on after", len(deref(tc.in)), err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("cursor %q: %d, %v; want %d", deref(tc.in), got, err, tc.want)
		}
	}
}
