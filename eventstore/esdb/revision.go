package esdb

import (
	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/relayhq/relay/domain"
)

// expectedRevision maps the port's optimistic-concurrency condition to the
// client's. It is the only place the two representations meet, so revision
// arithmetic never spreads through the adapter.
func expectedRevision(e domain.ExpectedRevision) esdb.ExpectedRevision {
	switch {
	case e.IsNoStream():
		return esdb.NoStream{}
	case e.IsStreamExists():
		return esdb.StreamExists{}
	}
	if rev, ok := e.ExactRevision(); ok {
		return esdb.Revision(rev)
	}
	return esdb.Any{}
}

// allPosition is where a read or subscription of $all starts in order to
// deliver the events after position after. EventStoreDB positions are
// (commit, prepare) pairs and the port keeps the commit part; every event
// with a greater commit position sorts after (after, after). Reads include
// the record at their start, so callers also drop events at or before after.
func allPosition(after uint64) esdb.AllPosition {
	if after == 0 {
		return esdb.Start{}
	}
	return esdb.Position{Commit: after, Prepare: after}
}
