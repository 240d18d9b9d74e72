package esdb

import (
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// The port's positions strictly increase; EventStoreDB's commit positions
// do not: every event of one multi-event append shares its append's commit
// position. A port position therefore packs the commit position with the
// event's index among the port's events of that append:
//
//	position = commit<<groupBits | index
//
// Commit positions are byte offsets of the server's log, and an append's
// events take more than one byte each, so the next append's commit position
// lies beyond any index of this one: the order of $all (commit, then
// prepare) is the order of the packed positions. groupBits bounds both parts:
// 65 536 events per append (the server's default 1 MiB append limit holds
// far fewer) and logs of up to 2^48 bytes (256 TiB).
const groupBits = 16

const (
	maxIndex  = 1<<groupBits - 1
	maxCommit = 1<<(64-groupBits) - 1
)

// portPosition packs the commit position of an event's append and the
// event's index in it (0 for the first).
func portPosition(commit, index uint64) (uint64, error) {
	if index > maxIndex {
		return 0, fmt.Errorf("event %d of an append at commit position %d: more than %d events in one append", index, commit, maxIndex+1)
	}
	if commit > maxCommit {
		return 0, fmt.Errorf("commit position %d beyond the %d a port position can hold", commit, uint64(maxCommit))
	}
	return commit<<groupBits | index, nil
}

// commitOf is the commit position of the append that holds the event at
// port position pos.
func commitOf(pos uint64) uint64 { return pos >> groupBits }

// allPosition is where a read or subscription of $all starts in order to
// deliver the events after port position after: at the start of the append
// that holds after, since an event's index counts from its append's first
// event. Every event of that append sorts at or after (commit, 0); callers
// drop those at or before after once they have placed them.
func allPosition(after uint64) esdb.AllPosition {
	if after == 0 {
		return esdb.Start{}
	}
	return esdb.Position{Commit: commitOf(after), Prepare: 0}
}

// positioner gives the events of a read, in $all (or stream) order, their
// port positions: it counts the events of each append as they pass. The
// read must start at an append's first event, or the positioner must be
// told how many came before (skip).
type positioner struct {
	commit  uint64
	next    uint64 // index of the next event of commit
	started bool
}

// place returns the port position of the next event read, whose commit
// position is commit. An unknown commit position (a stream read on servers
// that do not report it) places the event at 0.
func (p *positioner) place(commit uint64) (uint64, error) {
	if commit == unknownPosition {
		return 0, nil
	}
	if !p.started || commit != p.commit {
		p.commit, p.next, p.started = commit, 0, true
	}
	pos, err := portPosition(commit, p.next)
	if err != nil {
		return 0, err
	}
	p.next++
	return pos, nil
}

// skip tells the positioner that n events of the append at commit came
// before the read's first one.
func (p *positioner) skip(commit, n uint64) {
	p.commit, p.next, p.started = commit, n, true
}
