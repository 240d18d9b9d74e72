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

// OfAccount is the page of up to limit events of accountID's streams after
// position after: their places from the index, the events from the log,
// one read per run of consecutive revisions of a stream.
func (p EventPages) OfAccount(ctx context.Context, accountID string, after uint64, limit int) (EventPage, error) {
	refs, err := p.Index.AccountEvents(ctx, accountID, after, limit+1)
	if err != nil {
		return EventPage{}, err
	}
	byPlace := map[readmodel.EventRef]domain.RecordedEvent{}
	runs := map[string][]uint64{} // stream -> revisions wanted, ascending
	for _, ref := range refs {
		runs[ref.Stream] = append(runs[ref.Stream], ref.Revision)
	}
	for stream, revs := range runs {
		for i := 0; i < len(revs); {
			j := i + 1
			for j < len(revs) && revs[j] == revs[j-1]+1 {
				j++
			}
			read, err := p.Log.ReadStream(ctx, stream, revs[i], j-i)
			if err != nil {
				return EventPage{}, fmt.Errorf("read events of %s: %w", stream, err)
			}
			for _, e := range read {
				byPlace[readmodel.EventRef{Position: e.Position, Stream: e.Stream, Revision: e.Revision}] = e
			}
			i = j
		}
	}
	out := make([]domain.RecordedEvent, 0, len(refs))
	for _, ref := range refs {
		e, ok := byPlace[ref]
		if !ok {
			// The index and the log disagree: the views describe another
			// log (checked at start, see the projections' Reconcile).
			return EventPage{}, fmt.Errorf("read events: %s@%d at position %d is not in the log", ref.Stream, ref.Revision, ref.Position)
		}
		out = append(out, e)
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
