package commands

import (
	"fmt"
	"testing"
	"time"
)

// TestDevicePollsAreSweptByDoubling: with more than 10 000 device codes
// polled and none expired, a poll does not walk them all; the map is swept
// once it has doubled since the last sweep, and codes long expired go.
func TestDevicePollsAreSweptByDoubling(t *testing.T) {
	s := &Service{polls: map[string]time.Time{}}
	now := time.Unix(1_700_000_000, 0)
	for i := range 12_000 {
		s.pollTooSoon(fmt.Sprintf("live-%d", i), now)
	}
	sweeps := s.pollSweeps
	for i := range 5_000 {
		s.pollTooSoon(fmt.Sprintf("live-%d", i), now.Add(10*time.Second)) // the same codes polled again
	}
	if got := s.pollSweeps - sweeps; got != 0 {
		t.Errorf("5 000 polls of 12 000 live codes swept the map %d times, want none", got)
	}
	later := now.Add(time.Hour) // every code so far long expired
	for i := range 20_000 {
		s.pollTooSoon(fmt.Sprintf("new-%d", i), later)
	}
	if s.pollSweeps > 3 { // at 10 001, 20 003 (the expired go), 16 007
		t.Errorf("%d sweeps for 32 000 codes, want at most 3", s.pollSweeps)
	}
	if n := len(s.polls); n > 20_000 {
		t.Errorf("%d polls kept, want the expired ones gone (at most the 20 000 live)", n)
	}
}
