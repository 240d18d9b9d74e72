package graph

import (
	"fmt"
	"testing"
	"time"
)

// TestKnownSignInsBounded: the table of known (login, address) pairs never
// holds more than maxKnownSignIns; when full, pairs past knownSignInFor go
// first, and a pair is known only within knownSignInFor.
func TestKnownSignInsBounded(t *testing.T) {
	var k knownSignIns
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k.add("old@acme.test", "198.51.100.1", start)
	later := start.Add(knownSignInFor)
	if k.has("old@acme.test", "198.51.100.1", later) {
		t.Error("a pair is known past knownSignInFor")
	}
	if !k.has("OLD@acme.test", "198.51.100.1", later.Add(-time.Second)) || k.has("old@acme.test", "198.51.100.2", start) {
		t.Error("a pair is known by its login without case and its address only")
	}
	for i := range maxKnownSignIns + 100 {
		k.add(fmt.Sprintf("user%d@acme.test", i), "203.0.113.7", later)
	}
	if n := len(k.seen); n != maxKnownSignIns {
		t.Errorf("%d pairs kept, want at most %d", n, maxKnownSignIns)
	}
	if _, ok := k.seen[knownKey("old@acme.test", "198.51.100.1")]; ok {
		t.Error("an expired pair outlived the table filling up")
	}
	k.add("new@acme.test", "198.51.100.9", later)
	if !k.has("new@acme.test", "198.51.100.9", later) || len(k.seen) != maxKnownSignIns {
		t.Errorf("a new pair on a full table: known %v, %d pairs", k.has("new@acme.test", "198.51.100.9", later), len(k.seen))
	}
}
