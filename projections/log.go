package projections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// The views keep no headers or bodies: the log holds them once, in the
// DeliveryReceived and ForwardResponded events, and the deliveries row only
// says where those are. Reading a delivery reads them back from the store
// through ReadStream, which behaves alike on every adapter (global
// positions need not be contiguous, nor unique per event, on all of them).

// maxResponseSpan bounds how far after a delivery's DeliveryReceived its
// latest ForwardResponded may be for one stream read to fetch both: the
// events between them (attempts, answers) are small and read along.
const maxResponseSpan = 16

// logReaders bounds the concurrent stream reads of one page of history.
const logReaders = 4

// logReadShare is how many reads of the log one reader (readmodel.WithReader:
// an account, or an anonymous client's network) has running at once, its
// others waiting for one of its own to end: the embedded log reads on 4
// connections, and however many pages of bodies one reader asks for at
// once, another reader's read finds one it does not hold, as the views'
// readers do (readerShare). Reads that name no reader take no share.
const logReadShare = 3

// readStream is the store's ReadStream within ctx's reader's share of the
// log's reads.
func (v *History) readStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	if key := readmodel.ReaderOf(ctx); key != "" {
		release, err := v.logShares.Take(ctx, key, logReadShare)
		if err != nil {
			return nil, fmt.Errorf("wait for the reader's share of the log's reads: %w", err)
		}
		defer release()
	}
	return v.store.ReadStream(ctx, stream, from, max)
}

// errNotInLog reports a reference to an event the log does not hold.
var errNotInLog = errors.New("event not in the log")

// logEventRef locates one event: its stream and its revision there.
type logEventRef struct {
	stream   string
	revision uint64
}

func (r logEventRef) String() string { return fmt.Sprintf("%s@%d", r.stream, r.revision) }

// deliveryRefs locates the events that hold a delivery's request and its
// latest local response (nil when it has none).
type deliveryRefs struct {
	request  logEventRef
	response *logEventRef
}

// fillFromLog sets Headers and Body of d from its DeliveryReceived and
// ResponseHeaders and ResponseBody from its latest ForwardResponded, with
// the values the views always gave: empty rather than nil lists and
// bodies, and a nil ResponseBody when the response was not captured.
func (v *History) fillFromLog(ctx context.Context, d *readmodel.Delivery, r deliveryRefs) error {
	span := 1
	if resp := r.response; resp != nil && resp.stream == r.request.stream &&
		resp.revision > r.request.revision && resp.revision-r.request.revision < maxResponseSpan {
		span = int(resp.revision-r.request.revision) + 1
	}
	read, err := v.readStream(ctx, r.request.stream, r.request.revision, span)
	if err != nil {
		return fmt.Errorf("read request at %s: %w", r.request, err)
	}
	req, err := v.loggedEvent(ctx, read, r.request)
	if err != nil {
		return fmt.Errorf("read request at %s: %w", r.request, err)
	}
	received, ok := req.(domain.DeliveryReceived)
	if !ok || received.DeliveryID != d.ID {
		return fmt.Errorf("read request at %s: not the DeliveryReceived of %s", r.request, d.ID)
	}
	d.Headers, d.Body, d.DroppedHeaders = orEmpty(received.Headers), received.Body, received.DroppedHeaders
	d.Trailers, d.BodyUnread = orEmpty(received.Trailers), received.BodyUnread
	d.RedactedQuery = received.RedactedQuery
	if d.Body == nil {
		d.Body = []byte{}
	}

	d.ResponseHeaders, d.ResponseBody = []domain.Header{}, nil
	if r.response == nil {
		return nil
	}
	var resp domain.Event = received
	if *r.response != r.request { // else the receipt records the response (record.ReceiptHold)
		if r.response.stream != r.request.stream {
			read = nil
		}
		if resp, err = v.loggedEvent(ctx, read, *r.response); err != nil {
			return fmt.Errorf("read response at %s: %w", *r.response, err)
		}
	}
	var responded domain.ForwardResponded
	found := false
	for _, e := range domain.Expand(resp) { // a receipt may record it
		if a, is := e.(domain.ForwardResponded); is {
			responded, found = a, true
		}
	}
	if !found || responded.DeliveryID != d.ID {
		return fmt.Errorf("read response at %s: not a ForwardResponded of %s", *r.response, d.ID)
	}
	d.ResponseHeaders, d.ResponseNotCaptured = orEmpty(responded.Headers), responded.NotCaptured
	if responded.Captured { // an uncaptured body reads as nil, a captured empty one as empty
		d.ResponseBody = responded.Body
		if d.ResponseBody == nil {
			d.ResponseBody = []byte{}
		}
	}
	return nil
}

// loggedEvent decodes the event at ref, taken from read (events of ref's
// stream already read) or else read now.
func (v *History) loggedEvent(ctx context.Context, read []domain.RecordedEvent, ref logEventRef) (domain.Event, error) {
	for _, e := range read {
		if e.Revision == ref.revision {
			return v.codec.Decode(e.Type, e.Data)
		}
	}
	read, err := v.readStream(ctx, ref.stream, ref.revision, 1)
	if err != nil {
		return nil, err
	}
	if len(read) == 0 || read[0].Revision != ref.revision {
		return nil, errNotInLog
	}
	return v.codec.Decode(read[0].Type, read[0].Data)
}

// fillPageFromLog runs fillFromLog for every delivery of a page, a few at a
// time: each is a read of its own stream, and the store serves several
// reads at once.
func (v *History) fillPageFromLog(ctx context.Context, items []readmodel.Delivery, refs []deliveryRefs) error {
	workers := min(logReaders, len(items))
	if workers <= 1 {
		for i := range items {
			if err := v.fillFromLog(ctx, &items[i], refs[i]); err != nil {
				return fmt.Errorf("delivery %s: %w", items[i].ID, err)
			}
		}
		return nil
	}
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Bool
		errs   = make([]error, workers)
	)
	for w := range workers {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(items) {
					return
				}
				if err := v.fillFromLog(ctx, &items[i], refs[i]); err != nil {
					errs[w] = fmt.Errorf("delivery %s: %w", items[i].ID, err)
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func orEmpty(h []domain.Header) []domain.Header {
	if h == nil {
		return []domain.Header{}
	}
	return h
}

// MaxAttemptResponseBytes bounds the response bodies one read of a
// delivery's attempts holds: as much as one API answer may hold. A
// response past it is returned without its body, saying why.
const MaxAttemptResponseBytes = 32 << 20

// attemptResponsesPage is how many events of a delivery's stream one read
// of its attempts' responses holds at once: each may be a captured answer
// of up to the agent's 10 MiB.
const attemptResponsesPage = 4

// maxDeliveryEvents is the most events of a delivery's stream one read of
// its attempts' responses walks.
const maxDeliveryEvents = 10_000

// notReadTooLarge is why a captured response is returned without its body.
const notReadTooLarge = "not read: the responses read at once already hold 32 MiB"

// AttemptResponses reads what attempts of a delivery got back (those named
// in only, every one when it names none), from its stream in the log: the
// local response's status, headers and (when captured) body, or the failure
// the relay recorded; an attempt answered more than once, its latest. The
// views keep only the latest response; comparing attempts needs each one.
// The stream is read a few events at a time and only the named attempts'
// are decoded, and the bodies kept stay within MaxAttemptResponseBytes:
// before, every event of the stream was read and every answer decoded,
// 25 captured answers of 8 MB holding 400 MiB for one comparison.
func (v *History) AttemptResponses(ctx context.Context, deliveryID string, only ...string) (map[string]readmodel.AttemptResponse, error) {
	wanted := func(string) bool { return true }
	if len(only) > 0 {
		set := make(map[string]bool, len(only))
		for _, id := range only {
			set[id] = true
		}
		wanted = func(id string) bool { return set[id] }
	}
	stream := domain.DeliveryStream(deliveryID)
	out := map[string]readmodel.AttemptResponse{}
	var held int64 // bytes of the bodies in out
	put := func(id string, r readmodel.AttemptResponse) {
		held -= int64(len(out[id].Body))
		if r.Captured && held+int64(len(r.Body)) > MaxAttemptResponseBytes {
			r.Body, r.Captured, r.NotCaptured = nil, false, notReadTooLarge
		}
		held += int64(len(r.Body))
		out[id] = r
	}
	for from := uint64(0); from < maxDeliveryEvents; {
		events, err := v.readStream(ctx, stream, from, attemptResponsesPage)
		if errors.Is(err, domain.ErrStreamNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the attempts of %s: %w", deliveryID, err)
		}
		for _, e := range events {
			// A receipt may record its first attempt's answer
			// (record.ReceiptHold); the text is there whenever it does.
			inReceipt := e.Type == domain.TypeDeliveryReceived && bytes.Contains(e.Data, []byte(`"responded":`))
			if e.Type != domain.TypeForwardResponded && e.Type != domain.TypeForwardFailed && !inReceipt {
				continue
			}
			ev, err := v.codec.Decode(e.Type, e.Data)
			if err != nil {
				return nil, fmt.Errorf("read the attempts of %s: %w", deliveryID, err)
			}
			for _, ev := range domain.Expand(ev) {
				switch p := ev.(type) {
				case domain.ForwardResponded:
					if !wanted(p.AttemptID) {
						continue
					}
					r := readmodel.AttemptResponse{Status: p.Status, Headers: orEmpty(p.Headers), NotCaptured: p.NotCaptured}
					if p.Captured {
						r.Body, r.Captured = p.Body, true
						if r.Body == nil {
							r.Body = []byte{}
						}
					}
					put(p.AttemptID, r)
				case domain.ForwardFailed:
					if wanted(p.AttemptID) {
						put(p.AttemptID, readmodel.AttemptResponse{Status: p.Status, Headers: []domain.Header{}, Error: p.Error})
					}
				}
			}
		}
		if len(events) < attemptResponsesPage {
			break
		}
		from = events[len(events)-1].Revision + 1
	}
	return out, nil
}
