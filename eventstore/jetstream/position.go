package jetstream

import (
	"fmt"
	"math"

	"github.com/relayhq/relay/domain"
)

// MaxAppendEvents is the most events one append may carry: an append is one
// JetStream message, and its events take the positions of that message's
// slot (see position).
const MaxAppendEvents = positionSlot

// positionSlot is how many positions each message sequence owns. Decimal,
// so a position reads as the message sequence followed by three digits.
const positionSlot = 1000

// position is the global position of event i (0-based) of a message with
// sequence seq that holds n events. The events take the last n positions of
// the message's slot [seq×1000, seq×1000+999], so every message's last event
// sits at seq×1000+999 and the newest position of the log follows from the
// stream's last sequence alone (lastPosition). Positions rise strictly
// through a message and from one message to the next; they have gaps.
func position(seq uint64, i, n int) uint64 {
	return seq*positionSlot + uint64(positionSlot-n+i)
}

// lastPosition is the position of the newest event of a log whose last
// message sequence is lastSeq (0 for an empty log).
func lastPosition(lastSeq uint64) uint64 {
	if lastSeq == 0 {
		return 0
	}
	return position(lastSeq, 0, 1)
}

// firstSeq is the first message sequence that may hold an event with a
// position greater than after: the message whose slot holds after (some of
// its events may come later), or the first message of the log.
func firstSeq(after uint64) uint64 {
	return max(after/positionSlot, 1)
}

// head is what an append needs to know about a stream: its newest message
// (sequence seq) and the revisions of that message's first and last events.
// The zero head is an empty stream.
type head struct {
	exists      bool
	seq         uint64
	first, last uint64
}

// nextRevision is the revision the stream's next event takes.
func (h head) nextRevision() uint64 {
	if !h.exists {
		return 0
	}
	return h.last + 1
}

// expectedSubjectSeq maps the port's condition onto JetStream's: the
// Nats-Expected-Last-Subject-Sequence an append must carry so that the
// server refuses it unless the stream still ends at h, or ok=false when h
// already fails the condition. Revisions count events while subject
// sequences count messages (one per append), so an exact revision matches
// only the stream's newest message, by its last event's revision.
// Sequence 0 tells the server the subject must hold no message yet.
func expectedSubjectSeq(e domain.ExpectedRevision, h head) (seq uint64, ok bool) {
	if !e.Matches(h.last, h.exists) {
		return 0, false
	}
	if !h.exists {
		return 0, true
	}
	return h.seq, true
}

// placeOf is the revision an append's first event must land on for a
// retry of it to be recognised there: 0 for NoStream, rev+1 for Exact(rev).
// Any and StreamExists name no place (ok=false).
func placeOf(e domain.ExpectedRevision) (rev uint64, ok bool) {
	if e.IsNoStream() {
		return 0, true
	}
	if r, exact := e.ExactRevision(); exact && r < math.MaxUint64 {
		return r + 1, true
	}
	return 0, false
}

// checkAppendSize refuses appends that do not fit one message's slot.
func checkAppendSize(n int) error {
	if n > MaxAppendEvents {
		return &domain.InvalidInputError{Field: "events", Reason: fmt.Sprintf("%d in one append, at most %d", n, MaxAppendEvents)}
	}
	return nil
}
