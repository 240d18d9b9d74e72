package tunnel

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestCopyCountsBoundWhatIsGiven: the copies given of one delivery,
// counted from what it had recorded when first counted and every copy
// given since, never pass domain.MaxDeliveryCopies, whatever the commands
// say they had recorded when requested (the copies before theirs not yet
// recorded). A count is kept while its copies are out and
// copyCountLinger after, then dropped; another node's copies, in a
// command's CopiesRecorded, raise it.
func TestCopyCountsBoundWhatIsGiven(t *testing.T) {
	var c copyCounts
	now := time.Unix(1_000_000, 0)
	cmd := domain.ForwardCommand{DeliveryID: "d1", CopiesRecorded: 0}
	total := 0
	for range 100 {
		// Every attempt requested before any copy is recorded.
		total += c.give(cmd, 8, now)
	}
	if total != domain.MaxDeliveryCopies {
		t.Fatalf("100 attempts of 8 copies, none recorded yet: %d given, want %d", total, domain.MaxDeliveryCopies)
	}
	// The copies are recorded; an attempt whose command saw some of them
	// gives none past the bound either.
	for range total {
		c.settle("d1", now)
	}
	if n := c.give(domain.ForwardCommand{DeliveryID: "d1", CopiesRecorded: 120}, 8, now.Add(copyCountLinger/2)); n != 0 {
		t.Fatalf("a delivery at its bound gave %d copies", n)
	}
	// Another delivery is counted apart; another node's copies count.
	if n := c.give(domain.ForwardCommand{DeliveryID: "d2", CopiesRecorded: 195}, 8, now); n != 5 {
		t.Fatalf("a delivery with 195 copies recorded gave %d, want 5", n)
	}
	if n := c.give(domain.ForwardCommand{DeliveryID: "d3", CopiesRecorded: 10}, 8, now); n != 8 {
		t.Fatalf("gave %d, want 8", n)
	}
	if n := c.give(domain.ForwardCommand{DeliveryID: "d3", CopiesRecorded: 196}, 8, now); n != 4 {
		t.Fatalf("with 196 recorded (another node's copies among them) gave %d, want 4", n)
	}

	// Dropped copyCountLinger after its copies are all recorded, not
	// while one is out.
	c.settle("d2", now)
	later := now.Add(2 * copyCountLinger) // d1 was last given to at copyCountLinger/2
	c.give(domain.ForwardCommand{DeliveryID: "d4"}, 1, later)
	c.settle("d4", later)
	if c.byDelivery["d1"] != nil {
		t.Errorf("d1's count kept past copyCountLinger with no copy out")
	}
	if c.byDelivery["d2"] == nil || c.byDelivery["d3"] == nil {
		t.Errorf("a count dropped with copies still out")
	}
	// A delivery counted anew starts from what its command says.
	if n := c.give(domain.ForwardCommand{DeliveryID: "d1", CopiesRecorded: 200}, 8, later); n != 0 {
		t.Errorf("a delivery with its copies recorded gave %d", n)
	}
}

// TestCopyCountsStayBounded: the counts of deliveries with no copy out
// are dropped once more than copyCountsKept are kept, before their
// linger.
func TestCopyCountsStayBounded(t *testing.T) {
	var c copyCounts
	now := time.Unix(1_000_000, 0)
	for i := range 3 * copyCountsKept {
		id := fmt.Sprint("d", i)
		c.give(domain.ForwardCommand{DeliveryID: id}, 1, now)
		c.settle(id, now)
	}
	if n := c.counted(); n > 2*copyCountsKept {
		t.Fatalf("%d deliveries counted, want at most %d", n, 2*copyCountsKept)
	}
}
