package tunnel

import (
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
)

// copyCounts counts the copies this hub gives of each delivery, so that
// no more are given than the delivery may record (domain.
// MaxDeliveryCopies). A command knows only the copies its delivery had
// recorded when it was requested (CopiesRecorded): the copies of the
// attempts before it are recorded after their primaries' outcomes, and
// may still be on their way then. Bounded by that alone, 60 retries to 9
// listeners gave 201–296 copies of a delivery that records 200.
//
// A delivery is counted from its first attempt here that gives copies: the
// copies it had recorded then, and every copy given since. Its count is
// kept while any of those copies is not yet recorded, and copyCountLinger
// after the last is, for an attempt requested before that (whose
// CopiesRecorded misses them) and not yet dispatched; then it is dropped,
// and the log's count, in the next command, is the whole count again.
type copyCounts struct {
	mu         sync.Mutex
	byDelivery map[string]*deliveryCopies
	pruned     time.Time
	pruneAt    int // the size that prunes at once
}

// deliveryCopies is one delivery's count.
type deliveryCopies struct {
	given   int       // recorded when first counted, and given since
	out     int       // given and not yet recorded (or refused)
	settled time.Time // when out last fell to 0
}

// copyCountLinger is how long a delivery's count is kept once its copies
// are recorded: far longer than an attempt takes from its request to its
// dispatch, which read nothing from the store in between.
const copyCountLinger = 30 * time.Second

// copyCountsKept is the size past which the counts of deliveries with no
// copy out are dropped before copyCountLinger: the hub then counts at
// least the deliveries whose copies are out, whatever their number.
const copyCountsKept = 1 << 16

// give counts and returns how many of want copies cmd's attempt may give.
// It is called with the hub's lock held: it never scans the counts.
func (c *copyCounts) give(cmd domain.ForwardCommand, want int, now time.Time) int {
	if want <= 0 {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.byDelivery[cmd.DeliveryID]
	// Another node's copies are in the log's count only.
	given := cmd.CopiesRecorded
	if d != nil {
		given = max(d.given, given)
	}
	n := min(want, max(0, domain.MaxDeliveryCopies-given))
	if d == nil {
		if n == 0 {
			return 0 // none given: nothing to count
		}
		if c.byDelivery == nil {
			c.byDelivery = map[string]*deliveryCopies{}
		}
		d = &deliveryCopies{}
		c.byDelivery[cmd.DeliveryID] = d
	}
	d.given = given + n
	d.out += n
	if d.out == 0 {
		d.settled = now
	}
	return n
}

// settle tells that a copy of deliveryID given here was recorded, or
// will not be. Every copy given is settled, so the counts are pruned
// here, off the hub's lock.
func (c *copyCounts) settle(deliveryID string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.byDelivery[deliveryID]; d != nil && d.out > 0 {
		if d.out--; d.out == 0 {
			d.settled = now
		}
	}
	if len(c.byDelivery) >= max(c.pruneAt, copyCountsKept) || now.Sub(c.pruned) > copyCountLinger/4 {
		c.prune(now)
	}
}

// prune drops the counts whose copies are all recorded, since
// copyCountLinger, or all of them when more than copyCountsKept are left.
// c.mu held.
func (c *copyCounts) prune(now time.Time) {
	for id, d := range c.byDelivery {
		if d.out == 0 && now.Sub(d.settled) > copyCountLinger {
			delete(c.byDelivery, id)
		}
	}
	if len(c.byDelivery) > copyCountsKept {
		for id, d := range c.byDelivery {
			if d.out == 0 {
				delete(c.byDelivery, id)
			}
		}
	}
	c.pruned, c.pruneAt = now, 2*len(c.byDelivery)
}

// counted is how many deliveries are counted (for tests).
func (c *copyCounts) counted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byDelivery)
}
