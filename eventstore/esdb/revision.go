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
