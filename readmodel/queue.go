package readmodel

import "time"

// Queue states of a queued delivery (docs/queue.md).
const (
	QueueQueued   = "queued"   // waiting for its time or a listener
	QueueInFlight = "inflight" // an attempt is out
	QueueDead     = "dead"     // given up: attempts or age ran out
	QueueDone     = "delivered"
)

// QueueEntry is a QUEUE Endpoint's delivery not yet delivered.
type QueueEntry struct {
	DeliveryID string
	EndpointID string
	AccountID  string
	Seq        int64     // its receipt's log position: the queue's order
	Since      time.Time // its receipt, or its latest redrive: what its age runs from
	State      string
	NextAt     time.Time // when its next attempt is due (queued)
	Tries      int       // attempts sent
	Failures   int       // attempts that failed by the policy
	AttemptID  string    // the attempt out (in flight)
	InFlightAt time.Time
	// Duplicate: the next attempt may reach the local process a second
	// time (an earlier one was left open by a crash or a lost node).
	Duplicate bool
	Reason    string // the latest failure, or why it is dead
	// Duplicates counts the attempts sent as possible duplicates; Status
	// is the local answer that delivered it (0 before).
	Duplicates int
	Status     int
	// Bytes is the size of its request as stored (headers and body), what
	// an attempt holds while it is out; read only with the due deliveries
	// (0 when the history no longer has it).
	Bytes int64
}

// QueueCounts are an Endpoint's queue by state.
type QueueCounts struct {
	Queued, InFlight, Dead int
}
