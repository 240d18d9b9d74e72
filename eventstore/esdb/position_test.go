package esdb

import (
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// These tests need no server: they hold the mapping from EventStoreDB's
// (commit, prepare) positions to the port's strictly increasing ones. No
// EventStoreDB server runs in this repository's tests, so the mapping is
// checked here as a function of the positions a server reports.

// appendAt is one append as $all shows it: its commit position, shared by
// its events, and how many events it wrote.
type appendAt struct {
	commit uint64
	events int
}

// read places the events of the appends as a forward read of $all does.
func read(t *testing.T, appends []appendAt) []uint64 {
	t.Helper()
	var (
		place positioner
		out   []uint64
	)
	for _, a := range appends {
		for range a.events {
			pos, err := place.place(a.commit)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, pos)
		}
	}
	return out
}

func TestPositionsStrictlyIncrease(t *testing.T) {
	// Byte offsets as a server gives them: appends of one, three and two
	// events, the events of each sharing its commit position.
	appends := []appendAt{{4096, 1}, {4301, 3}, {5020, 2}, {5300, 1}}
	got := read(t, appends)
	if len(got) != 7 {
		t.Fatalf("%d positions, want 7", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("position %d = %d after %d: not strictly increasing (%v)", i, got[i], got[i-1], got)
		}
	}
	// The events of one append stay together, in order, under its commit.
	for i, want := range []uint64{4096, 4301, 4301, 4301, 5020, 5020, 5300} {
		if commitOf(got[i]) != want {
			t.Errorf("commitOf(position %d) = %d, want %d", i, commitOf(got[i]), want)
		}
	}
	if got[2]-got[1] != 1 || got[3]-got[2] != 1 {
		t.Errorf("the three events of one append at %v, want consecutive", got[1:4])
	}
}

// TestResumeInsideAnAppend resumes after each event: the read starts at
// the append that holds it and drops what it already had, as ReadAll and
// SubscribeAll do, and yields exactly the events after it.
func TestResumeInsideAnAppend(t *testing.T) {
	appends := []appendAt{{100, 2}, {350, 4}, {900, 1}}
	all := read(t, appends)
	for i, after := range all {
		start, ok := allPosition(after).(esdb.Position)
		if !ok || start.Commit != commitOf(after) || start.Prepare != 0 {
			t.Fatalf("allPosition(%d) = %#v, want the start of the append at %d", after, allPosition(after), commitOf(after))
		}
		var from []appendAt
		for _, a := range appends {
			if a.commit >= start.Commit {
				from = append(from, a)
			}
		}
		var rest []uint64
		for _, p := range read(t, from) {
			if p > after {
				rest = append(rest, p)
			}
		}
		if want := all[i+1:]; len(rest) != len(want) || (len(want) > 0 && rest[0] != want[0]) {
			t.Fatalf("after %d: %v, want %v", after, rest, want)
		}
	}
	if allPosition(0) != (esdb.Start{}) {
		t.Fatalf("allPosition(0) = %#v, want the start of $all", allPosition(0))
	}
}

// TestStreamReadInsideAnAppend: a stream read that starts at an append's
// third event, told of the two before it, places it where $all does.
func TestStreamReadInsideAnAppend(t *testing.T) {
	want := read(t, []appendAt{{350, 4}})
	var place positioner
	place.skip(350, 2)
	for _, w := range want[2:] {
		got, err := place.place(350)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Fatalf("position %d, want %d", got, w)
		}
	}
}

func TestPortPositionLimits(t *testing.T) {
	if _, err := portPosition(1, maxIndex); err != nil {
		t.Fatalf("last index: %v", err)
	}
	if _, err := portPosition(1, maxIndex+1); err == nil {
		t.Fatal("an index beyond the append's slots was accepted")
	}
	if _, err := portPosition(maxCommit+1, 0); err == nil {
		t.Fatal("a commit position beyond the port's range was accepted")
	}
	if p, _ := portPosition(maxCommit, maxIndex); p != ^uint64(0) {
		t.Fatalf("largest position = %d", p)
	}
}
