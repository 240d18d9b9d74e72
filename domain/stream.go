package domain

import (
	"context"
	"fmt"
)

// streamPage is how many events one ReadStream call of LoadStream asks for.
const streamPage = 512

// LoadStream reads the whole of stream and decodes its events, in revision
// order: recs[i] holds the envelope of events[i]. A stream with no events
// returns an error matching ErrStreamNotFound.
func LoadStream(ctx context.Context, store EventStore, codec *Codec, stream string) (recs []RecordedEvent, events []Event, err error) {
	for {
		batch, err := store.ReadStream(ctx, stream, uint64(len(recs)), streamPage)
		if err != nil {
			return nil, nil, fmt.Errorf("load %s: %w", stream, err)
		}
		for _, r := range batch {
			e, err := codec.Decode(r.Type, r.Data)
			if err != nil {
				return nil, nil, fmt.Errorf("load %s revision %d: %w", stream, r.Revision, err)
			}
			events = append(events, e)
		}
		recs = append(recs, batch...)
		if len(batch) < streamPage {
			return recs, events, nil
		}
	}
}
