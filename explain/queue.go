package explain

import (
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Queue adds to x where a queued delivery stands in its QUEUE Endpoint's
// queue (docs/queue.md): one fact, read from the queue view, after the
// others. The attempts themselves are already facts of x.
func Queue(x *Explanation, e readmodel.QueueEntry) {
	text := QueueStatus(e)
	if text == "" {
		return
	}
	f := Fact{At: e.InFlightAt, Text: "queue: " + text}
	if e.State == readmodel.QueueQueued && e.Failures == 0 && (e.Tries == 0 || e.Reason == "") {
		f.At = e.Since // waiting since it was queued
	}
	if f.At.IsZero() {
		f.At = e.Since
	}
	if f.At.Before(lastAt(x)) {
		f.At = lastAt(x) // facts stay in time order
	}
	x.Facts = append(x.Facts, f)
}

// QueueStatus says where a queued delivery stands, in one sentence ("attempt
// 1 failed 503, next at …", "dead after 5 attempts: last 503"): the queue
// fact of its explanation, and what the API (DeliveryQueue.status) gives
// the command line and the console to show. "" for a state it does not know.
func QueueStatus(e readmodel.QueueEntry) string {
	var s string
	switch e.State {
	case readmodel.QueueDone:
		s = fmt.Sprintf("delivered on attempt %d (%d)", e.Tries, e.Status)
	case readmodel.QueueDead:
		s = e.Reason
	case readmodel.QueueInFlight:
		s = fmt.Sprintf("attempt %d sent, waiting for its outcome", e.Tries)
	case readmodel.QueueQueued:
		switch {
		case e.Failures > 0:
			s = fmt.Sprintf("attempt %d failed %s, next at %s", e.Tries, e.Reason, FormatTime(e.NextAt))
		case e.Tries > 0 && e.Reason != "":
			s = fmt.Sprintf("attempt %d: %s; next at %s", e.Tries, e.Reason, FormatTime(e.NextAt))
		default:
			s = "queued, waiting for a listener"
		}
	default:
		return ""
	}
	if e.Duplicate && e.State == readmodel.QueueQueued {
		s += "; the next attempt may be a duplicate (an earlier one was left open)"
	}
	if e.Duplicates > 0 {
		s += "; " + domain.Counted(e.Duplicates, "attempt", "attempts") + " sent again after one was left open (possible duplicates, same Relay-Delivery-Id)"
	}
	return s
}

func lastAt(x *Explanation) time.Time {
	if len(x.Facts) == 0 {
		return time.Time{}
	}
	return x.Facts[len(x.Facts)-1].At
}
