package jetstream

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/natstest"
)

// TestReadStreamSeeksItsStart: a read of a long stream from a late
// revision asks the server for about as many messages as the log's
// sequences have bits, then for the messages it returns, not for every
// message of the stream before it; LastEvent asks for one.
func TestReadStreamSeeksItsStart(t *testing.T) {
	srv := natstest.Start(t)
	s := openStore(t, srv, freshOptions())
	ctx := testContext(t)
	stream, other := "long-"+uuid.NewString(), "other-"+uuid.NewString()
	const messages = 1000
	for i := range messages {
		mustAppend(t, s, stream, domain.Any(), newEvent(fmt.Sprint(i)))
		mustAppend(t, s, other, domain.Any(), newEvent(fmt.Sprint(i)))
	}
	requests := func(read func()) uint64 {
		before := s.nc.Stats().OutMsgs
		read()
		return s.nc.Stats().OutMsgs - before
	}
	// The seek (one request per bit of the log's last sequence), the
	// stream's head, and one request per message read.
	const max = 5
	bound := uint64(bits.Len64(2*messages)) + 2 + max
	for _, from := range []uint64{1, messages / 2, messages - 10} {
		n := requests(func() {
			got, err := s.ReadStream(ctx, stream, from, max)
			if err != nil || len(got) != max || got[0].Revision != from {
				t.Fatalf("ReadStream from %d: %d events, %v", from, len(got), err)
			}
		})
		t.Logf("ReadStream from revision %d of %d: %d requests", from, messages, n)
		if n > bound {
			t.Errorf("ReadStream from revision %d of %d asked the server %d times, want at most %d", from, messages, n, bound)
		}
	}
	if n := requests(func() {
		if e, err := s.LastEvent(ctx, stream); err != nil || e.Revision != messages-1 {
			t.Fatalf("LastEvent: %+v, %v", e, err)
		}
	}); n != 1 {
		t.Errorf("LastEvent asked the server %d times, want 1", n)
	}
}
