package explain

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/readmodel"
)

// Queue adds to x where a queued delivery stands in its QUEUE Endpoint's
// queue (docs/queue.md): one fact, read from the queue view, after the
// others. The attempts themselves are already facts of x.
func Queue(x *Explanation, e readmodel.QueueEntry) {
	var f Fact
	switch e.State {
	case readmodel.QueueDone:
		f = Fact{At: e.InFlightAt, Text: fmt.Sprintf("queue: delivered on attempt %d (%d)", e.Tries, e.Status)}
	case readmodel.QueueDead:
		f = Fact{At: e.InFlightAt, Text: "queue: " + e.Reason}
	case readmodel.QueueInFlight:
		f = Fact{At: e.InFlightAt, Text: fmt.Sprintf("queue: attempt %d sent, waiting for its outcome", e.Tries)}
	case readmodel.QueueQueued:
		switch {
		case e.Failures > 0:
			f = Fact{At: e.InFlightAt, Text: fmt.Sprintf("queue: attempt %d failed %s, next at %s", e.Tries, e.Reason, FormatTime(e.NextAt))}
		case e.Tries > 0 && e.Reason != "":
			f = Fact{At: e.InFlightAt, Text: fmt.Sprintf("queue: attempt %d: %s; next at %s", e.Tries, e.Reason, FormatTime(e.NextAt))}
		default:
			f = Fact{At: e.Since, Text: "queue: queued, waiting for a listener"}
		}
	default:
		return
	}
	if e.Duplicates > 0 {
		f.Text += fmt.Sprintf("; %d attempt(s) sent again after one was left open (possible duplicates, same Relay-Delivery-Id)", e.Duplicates)
	}
	if f.At.IsZero() {
		f.At = e.Since
	}
	if f.At.Before(lastAt(x)) {
		f.At = lastAt(x) // facts stay in time order
	}
	x.Facts = append(x.Facts, f)
}

func lastAt(x *Explanation) time.Time {
	if len(x.Facts) == 0 {
		return time.Time{}
	}
	return x.Facts[len(x.Facts)-1].At
}
