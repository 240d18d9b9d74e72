package systemtest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestListenWarnsWhenNothingListens: listen tries one connection to its
// target as it starts and, when nothing listens there, says that
// deliveries will be answered 502 until something does; it goes on either
// way (people start it before their app), and says nothing when a server
// listens.
func TestListenWarnsWhenNothingListens(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, _ := loggedInHome(t, r)
	_, listening := recordingTarget(t)
	closed := strconv.Itoa(harness.ClosedPort(t))
	tests := []struct {
		name   string
		port   string
		warned bool
	}{
		{"nothing listens", closed, true},
		{"a server listens", listening, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := h.startIn(t, t.TempDir(), "listen", tt.port)
			waitOutput(t, p, publicURLLine) // it went on
			warning := "nothing is listening on localhost:" + tt.port + " yet: deliveries will be answered 502 until it is"
			want := 0
			if tt.warned {
				want = 1
			}
			if got := strings.Count(p.Output(), warning); got != want {
				t.Errorf("listen %s printed the warning %d times, want it %v:\n%s", tt.port, got, tt.warned, p.Output())
			}
		})
	}
}
