package commands_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// fakeLog holds events by stream and counts the reads of them.
type fakeLog struct {
	streams map[string][]domain.RecordedEvent
	reads   int
}

func (l *fakeLog) ReadAll(context.Context, uint64, int) ([]domain.RecordedEvent, error) {
	panic("an account's page never reads the whole log")
}

func (l *fakeLog) ReadStream(_ context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	l.reads++
	evs := l.streams[stream]
	return evs[from:min(int(from)+max, len(evs))], nil
}

type fakeIndex []readmodel.EventRef

func (x fakeIndex) AccountEvents(_ context.Context, _ string, after uint64, limit int) ([]readmodel.EventRef, error) {
	var out []readmodel.EventRef
	for _, r := range x {
		if r.Position > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// TestAccountEventPages: an account's page holds its events in log order,
// read once per run of consecutive revisions of a stream, and says whether
// more follow.
func TestAccountEventPages(t *testing.T) {
	// Positions 1..6 interleave two streams: a@0 a@1 b@0 a@2 b@1 a@4.
	place := []struct {
		stream string
		rev    uint64
	}{{"a", 0}, {"a", 1}, {"b", 0}, {"a", 2}, {"b", 1}, {"a", 4}}
	log := &fakeLog{streams: map[string][]domain.RecordedEvent{}}
	var index fakeIndex
	for i, p := range place {
		pos := uint64(i + 1)
		for uint64(len(log.streams[p.stream])) < p.rev { // a@3 belongs to no page of this account
			log.streams[p.stream] = append(log.streams[p.stream], domain.RecordedEvent{Stream: p.stream, Revision: uint64(len(log.streams[p.stream])), Position: 100})
		}
		log.streams[p.stream] = append(log.streams[p.stream], domain.RecordedEvent{Stream: p.stream, Revision: p.rev, Position: pos})
		index = append(index, readmodel.EventRef{Position: pos, Stream: p.stream, Revision: p.rev})
	}
	pages := commands.EventPages{Log: log, Index: index}
	tests := []struct {
		name      string
		after     uint64
		limit     int
		want      string // stream@revision of the page's events
		wantMore  bool
		wantReads int
	}{
		{"first page", 0, 4, "a@0 a@1 b@0 a@2", true, 2},      // a@0..2 and b@0..1 (with the extra one that says more follow)
		{"whole", 0, 10, "a@0 a@1 b@0 a@2 b@1 a@4", false, 3}, // a@0..2, a@4 and b@0..1
		{"after a cursor", 4, 10, "b@1 a@4", false, 2},        // one per stream
		{"past the end", 6, 10, "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log.reads = 0
			page, err := pages.OfAccount(t.Context(), "acc", tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range page.Events {
				got = append(got, e.Stream+"@"+strconv.FormatUint(e.Revision, 10))
			}
			if g := strings.Join(got, " "); g != tt.want || page.More != tt.wantMore {
				t.Errorf("page %q more %v, want %q more %v", g, page.More, tt.want, tt.wantMore)
			}
			if log.reads != tt.wantReads {
				t.Errorf("%d reads of the log, want %d", log.reads, tt.wantReads)
			}
		})
	}
}
