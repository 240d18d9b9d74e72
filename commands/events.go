package commands

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// EventLog is the read side of the log that auditors page through and the
// API reads payloads from: the one declaration of it, for commands and the
// API alike.
type EventLog interface {
	ReadAll(ctx context.Context, after uint64, max int) ([]domain.RecordedEvent, error)
	ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error)
}

// EventIndex locates an account's events in the log (the views' index).
type EventIndex interface {
	AccountEvents(ctx context.Context, accountID string, after uint64, limit int) ([]readmodel.EventRef, error)
}

// EventPage is a page of the log, in order.
type EventPage struct {
	Events []domain.RecordedEvent
	// More says whether the log goes on after the page.
	More bool
}

// EventPages pages through the log for auditors. The operator reads all
// of it; an account reads only the events of its own streams, so the log
// never shows one tenant's deliveries to another. Either way a page costs
// what it holds: the operator's is a read of the log from the cursor, an
// account's a read of the index of its events and then of those events,
// never a scan of other accounts' events.
type EventPages struct {
	Log   EventLog
	Index EventIndex
}

// All is the page of up to limit events after position after.
func (p EventPages) All(ctx context.Context, after uint64, limit int) (EventPage, error) {
	// Each read asks for one event more than the page holds, so the page
	// learns whether the log goes on without a read of its own.
	evs, err := p.Log.ReadAll(ctx, after, limit+1)
	return page(evs, limit), err
}

// MaxEventPageBytes bounds the bytes of events (their data, bodies
// included) an account's page reads from the log: a page ends after the
// event that passes it, and pages on from there. Every event is read whole
// whatever the query selects, so 100 receipts of 256 KiB bodies made a page
// of 34 MB, and an operation of eight aliased pages 276 MB.
const MaxEventPageBytes = 4 << 20

// eventRun is the most events one read of a run asks for, so a page passes
// MaxEventPageBytes by at most that many events.
const eventRun = 8

// OfAccount is the page of up to limit events of accountID's streams after
// position after: their places from the index, then the events from the
// log, one read per run of consecutive revisions of a stream (at most
// eventRun), the runs in the order of their first event, until
// MaxEventPageBytes are read; the page is then the events up to the first
// one not read.
func (p EventPages) OfAccount(ctx context.Context, accountID string, after uint64, limit int) (EventPage, error) {
	refs, err := p.Index.AccountEvents(ctx, accountID, after, limit+1)
	if err != nil {
		return EventPage{}, err
	}
	type run struct{ refs []int } // indexes into refs, consecutive revisions of one stream
	var runs []*run
	open := map[string]*run{} // stream -> its latest run
	for i, ref := range refs {
		r := open[ref.Stream]
		if r == nil || len(r.refs) == eventRun || refs[r.refs[len(r.refs)-1]].Revision+1 != ref.Revision {
			r = &run{}
			runs = append(runs, r)
			open[ref.Stream] = r
		}
		r.refs = append(r.refs, i)
	}
	got := make([]domain.RecordedEvent, len(refs))
	have := make([]bool, len(refs))
	read := 0
	for _, r := range runs {
		if read >= MaxEventPageBytes {
			break
		}
		first := refs[r.refs[0]]
		evs, err := p.Log.ReadStream(ctx, first.Stream, first.Revision, len(r.refs))
		if err != nil {
			return EventPage{}, fmt.Errorf("read events of %s: %w", first.Stream, err)
		}
		for k, i := range r.refs {
			if k >= len(evs) || evs[k].Position != refs[i].Position || evs[k].Revision != refs[i].Revision {
				// The index and the log disagree: the views describe another
				// log (checked at start, see the projections' Reconcile).
				return EventPage{}, fmt.Errorf("read events: %s@%d at position %d is not in the log", refs[i].Stream, refs[i].Revision, refs[i].Position)
			}
			got[i], have[i] = evs[k], true
			read += len(evs[k].Data)
		}
	}
	out := make([]domain.RecordedEvent, 0, len(refs))
	for i := range refs {
		if !have[i] {
			// Cut by MaxEventPageBytes: the next page starts here.
			return EventPage{Events: out, More: true}, nil
		}
		out = append(out, got[i])
	}
	return page(out, limit), nil
}

// page cuts the read of limit+1 events to limit, noting the extra one.
func page(evs []domain.RecordedEvent, limit int) EventPage {
	if len(evs) > limit {
		return EventPage{Events: evs[:limit], More: true}
	}
	return EventPage{Events: evs}
}
