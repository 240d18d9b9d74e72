package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// latest ForwardResponded may be for one stream read to fetch both: only
// the next event. Events between them are not read along: among them may
// be retries' edits, up to --max-body each, which the stored bytes a read
// reserves of the answer's log budget do not count (a span of 16 read 8
// such deliveries' 2.8 MB of edits each for their 2-byte requests and
// answers, and had to run alone to stay within the budget); the answer
// further on is a read of its own.
const maxResponseSpan = 2

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
	// stored is the bytes of the delivery's request and answers in the log
	// (deliveries.stored_bytes): the most its events read by fillFromLog
	// hold, but for a small one (logReadSlack).
	stored int64
	// requestBytes is the bytes of its receipt alone, the answer it
	// records included (deliveries.request_bytes), 0 when the views do
	// not know them.
	requestBytes int64
}

// readSize is what fillFromLog's read of r reserves of the answer's log
// budget: the receipt's bytes when it reads the receipt alone (the
// request without the answer, or an answer the receipt records), what
// the delivery's stored bytes leave beside them when it reads the answer
// alone (the answers in events of their own, the latest among them), and
// the stored bytes when it reads both (logReadSize). Views that do not
// know the receipt's bytes reserve the stored bytes for any read. r.response
// is nil when the answer is not read; request says whether the request is.
// A read of the request alone reserved the delivery's every answer (a
// page of bodies of deliveries that had 4 MiB answers ran one read at a
// time under a budget of 1 MiB), one of the answer alone its request.
func (r deliveryRefs) readSize(request bool) int64 {
	switch {
	case r.requestBytes <= 0:
		return logReadSize(r.stored)
	case r.response == nil || *r.response == r.request:
		return r.requestBytes
	case !request:
		return logReadSize(r.stored - r.requestBytes)
	default:
		return logReadSize(r.stored)
	}
}

// logReadSlack is what a read of a delivery's events reserves of the
// answer's log budget beside the bytes the views count of them
// (deliveries.stored_bytes: its request and its answers): a latest
// answer that they do not count, an attempt's failure or the relay's own
// answer, small.
const logReadSlack = 64 << 10

// logReadSize is what a read of at most stored bytes the views count
// reserves of the answer's log budget (readmodel.LogBudget.Read); a read
// of which they count nothing (0 or less: a delivery they count nothing
// of, or whose counted events are read already) reserves it whole
// (readmodel.Unsized).
func logReadSize(stored int64) int64 {
	if stored <= 0 {
		return readmodel.Unsized
	}
	return stored + logReadSlack
}

// fillFromLog sets Headers and Body of d from its DeliveryReceived and
// ResponseHeaders and ResponseBody from its latest ForwardResponded, with
// the values the views always gave: empty rather than nil lists and
// bodies, and a nil ResponseBody when the response was not captured.
//
// Under readmodel.WithoutResponse the response is not read, under
// readmodel.WithoutRequest the request is not (but for the receipt that
// records the answer: one event holds both); with neither wanted nothing
// is read. The read runs within the answer's log budget
// (readmodel.LogBudget), charged for every event it reads, and is refused
// with readmodel.ErrLogBudget once the budget is spent: a request alone is
// up to --max-body, and aliases of delivery(id){ headers } each read one.
// It reserves the bytes the views count of the events it reads
// (deliveryRefs.readSize), so that the reads of a page run at once while
// their sizes fit in the budget: it reads the request and the answer and
// nothing between them (maxResponseSpan).
func (v *History) fillFromLog(ctx context.Context, d *readmodel.Delivery, r deliveryRefs) error {
	request := readmodel.WantsRequest(ctx)
	if !readmodel.WantsResponse(ctx) {
		r.response = nil
	}
	if !request && r.response == nil {
		d.ResponseHeaders, d.ResponseBody = []domain.Header{}, nil
		return nil
	}
	ok, err := readmodel.LogBudgetOf(ctx).Read(ctx, r.readSize(request), func() (int64, error) { return v.readPayload(ctx, d, r, request) })
	if err == nil && !ok {
		err = readmodel.ErrLogBudget
	}
	return err
}

// responseSpan is how many events from the request on one read of the
// delivery's stream takes: the request alone, or with its latest answer
// when that follows it at once (maxResponseSpan).
func responseSpan(r deliveryRefs) int {
	if resp := r.response; resp != nil && resp.stream == r.request.stream &&
		resp.revision > r.request.revision && resp.revision-r.request.revision < maxResponseSpan {
		return int(resp.revision-r.request.revision) + 1
	}
	return 1
}

// readPayload is fillFromLog's read, of the request when request is set
// and of the answer r.response names when not nil; n is the bytes of the
// events it read.
func (v *History) readPayload(ctx context.Context, d *readmodel.Delivery, r deliveryRefs, request bool) (n int64, err error) {
	// inReceipt: the receipt records the response (record.ReceiptHold).
	inReceipt := r.response != nil && *r.response == r.request
	var (
		read     []domain.RecordedEvent
		received domain.DeliveryReceived
	)
	if request || inReceipt {
		span := 1 // the receipt alone
		if request {
			span = responseSpan(r)
		}
		read, err = v.readStream(ctx, r.request.stream, r.request.revision, span)
		for _, e := range read {
			n += int64(len(e.Data))
		}
		if err != nil {
			return n, fmt.Errorf("read request at %s: %w", r.request, err)
		}
		req, more, err := v.loggedEvent(ctx, read, r.request)
		n += more
		if err != nil {
			return n, fmt.Errorf("read request at %s: %w", r.request, err)
		}
		var ok bool
		received, ok = req.(domain.DeliveryReceived)
		if !ok || received.DeliveryID != d.ID {
			return n, fmt.Errorf("read request at %s: not the DeliveryReceived of %s", r.request, d.ID)
		}
	}
	if request {
		d.Headers, d.Body, d.DroppedHeaders = orEmpty(received.Headers), received.Body, received.DroppedHeaders
		d.Trailers, d.BodyUnread = orEmpty(received.Trailers), received.BodyUnread
		d.RedactedQuery = received.RedactedQuery
		if d.Body == nil {
			d.Body = []byte{}
		}
	}

	d.ResponseHeaders, d.ResponseBody = []domain.Header{}, nil
	if r.response == nil {
		return n, nil
	}
	var resp domain.Event = received
	if !inReceipt {
		var more int64
		if r.response.stream != r.request.stream {
			read = nil
		}
		resp, more, err = v.loggedEvent(ctx, read, *r.response)
		n += more
		if err != nil {
			return n, fmt.Errorf("read response at %s: %w", *r.response, err)
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
		return n, fmt.Errorf("read response at %s: not a ForwardResponded of %s", *r.response, d.ID)
	}
	d.ResponseHeaders, d.ResponseNotCaptured = orEmpty(responded.Headers), responded.NotCaptured
	if responded.Captured { // an uncaptured body reads as nil, a captured empty one as empty
		d.ResponseBody = responded.Body
		if d.ResponseBody == nil {
			d.ResponseBody = []byte{}
		}
	}
	return n, nil
}

// loggedEvent decodes the event at ref, taken from read (events of ref's
// stream already read) or else read now; n is the bytes read now.
func (v *History) loggedEvent(ctx context.Context, read []domain.RecordedEvent, ref logEventRef) (ev domain.Event, n int64, err error) {
	for _, e := range read {
		if e.Revision == ref.revision {
			ev, err = v.codec.Decode(e.Type, e.Data)
			return ev, 0, err
		}
	}
	read, err = v.readStream(ctx, ref.stream, ref.revision, 1)
	for _, e := range read {
		n += int64(len(e.Data))
	}
	if err != nil {
		return nil, n, err
	}
	if len(read) == 0 || read[0].Revision != ref.revision {
		return nil, n, errNotInLog
	}
	ev, err = v.codec.Decode(read[0].Type, read[0].Data)
	return ev, n, err
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

// maxAttemptResponsesRead bounds the bytes of the log one read of a
// delivery's attempts' responses reads: each answer it reads may hold a
// body of up to the agent's 10 MiB, in base64. Responses past it are
// returned with the status the views keep, saying why.
const maxAttemptResponsesRead = 2 * MaxAttemptResponseBytes

// Why a response is not read with the others (AttemptResponse.NotRead).
const (
	NotReadTooLarge = "not read: the responses read at once already hold 32 MiB of bodies"
	NotReadLogBytes = "not read: the responses read at once already read 64 MiB of the log"
)

// AttemptResponses reads what attempts of a delivery got back (those named
// in only, every one when it names none) from the log: the local
// response's status, headers and (when captured) body, or the failure the
// relay recorded; an attempt answered more than once, its latest. The
// views keep only the latest response of a delivery; comparing attempts
// needs each one. Bodies of up to maxBody bytes are decoded; a larger one
// is returned as the log holds it (Encoded) with its size, and with
// maxBody 0 no body is read at all (Body nil whatever Captured says).
//
// The views say where each attempt's latest outcome is in the log
// (attempts.outcome_position), and only those events are read: a read
// costs what the attempts it names hold, not what the delivery holds. The
// bodies kept (decoded or encoded) stay within MaxAttemptResponseBytes,
// and the read stops reading the log past maxAttemptResponsesRead: the
// responses past either are returned with their status and NotRead. Each
// event is read within the answer's log budget (readmodel.LogBudget), which
// bounds the reads of one API answer together: the responses past it are
// returned the same way (readmodel.NotReadLogBudget). Each event reserves
// of it what the delivery's stored bytes leave beside the events of them
// read already (logReadSize), so that the reads of other deliveries and
// aliases run beside it while they fit. Before,
// it walked and decoded the delivery's whole stream: a comparison of two
// attempts of a delivery with 50 captured answers of 8 MB took a core
// 3.9 s.
func (v *History) AttemptResponses(ctx context.Context, deliveryID string, maxBody int64, only ...string) (map[string]readmodel.AttemptResponse, error) {
	outcomes, stored, err := v.outcomes(ctx, deliveryID, only)
	if err != nil {
		return nil, err
	}
	stream := domain.DeliveryStream(deliveryID)
	budget := readmodel.LogBudgetOf(ctx)
	out := map[string]readmodel.AttemptResponse{}
	var held, read int64 // bytes of the bodies in out, of the events read
	// counted is the bytes of the events read that the views count in the
	// delivery's stored bytes (its receipt and answers): the events still
	// to read hold at most stored-counted of them, which each reserves of
	// the answer's budget.
	var counted int64
	// responded is what p answered; body is its body, decoded (a receipt's)
	// or in base64 (body64, from DecodeRespondedHead).
	responded := func(p domain.ForwardResponded, body, body64 []byte) (readmodel.AttemptResponse, error) {
		r := readmodel.AttemptResponse{Status: p.Status, Headers: orEmpty(p.Headers), NotCaptured: p.NotCaptured, Captured: p.Captured}
		if !p.Captured || maxBody == 0 {
			return r, nil
		}
		size := int64(len(body))
		kept := size // the bytes out holds for it
		if body64 != nil {
			size, kept = int64(domain.Body64Len(body64)), int64(domain.Body64Len(body64))
			if size > maxBody {
				kept = int64(len(body64))
			}
		}
		if held+kept > MaxAttemptResponseBytes {
			return readmodel.AttemptResponse{Status: p.Status, NotRead: NotReadTooLarge}, nil
		}
		r.BodySize = size
		switch {
		case body64 == nil:
			r.Body = body
		case size > maxBody:
			r.Encoded = body64
		default:
			var err error
			if r.Body, err = domain.DecodeBody64(body64); err != nil {
				return r, err
			}
		}
		if r.Encoded == nil && r.Body == nil {
			r.Body = []byte{}
		}
		held += kept
		return r, nil
	}
	for _, o := range outcomes {
		if read >= maxAttemptResponsesRead {
			out[o.attempt] = readmodel.AttemptResponse{Status: o.status, NotRead: NotReadLogBytes}
			continue
		}
		var (
			e     domain.RecordedEvent
			found bool
		)
		ok, err := budget.Read(ctx, logReadSize(stored-counted), func() (int64, error) {
			var err error
			e, found, err = v.readAt(ctx, o.position)
			return int64(len(e.Data)), err
		})
		if err != nil {
			return nil, fmt.Errorf("read the attempts of %s: %w", deliveryID, err)
		}
		if !ok {
			out[o.attempt] = readmodel.AttemptResponse{Status: o.status, NotRead: readmodel.NotReadLogBudget}
			continue
		}
		if !found || e.Stream != stream {
			continue // deleted since the views were read
		}
		read += int64(len(e.Data))
		if e.Type == domain.TypeForwardResponded || e.Type == domain.TypeDeliveryReceived {
			counted += int64(len(e.Data))
		}
		switch e.Type {
		case domain.TypeForwardResponded:
			p, body64, err := domain.DecodeRespondedHead(e.Data)
			if err == nil && p.AttemptID == o.attempt {
				out[o.attempt], err = responded(p, p.Body, body64)
			}
			if err != nil {
				return nil, fmt.Errorf("read the attempts of %s: %w", deliveryID, err)
			}
		case domain.TypeForwardFailed, domain.TypeDeliveryReceived:
			// A receipt may record its first attempt's answer
			// (record.ReceiptHold); there is one receipt a delivery.
			ev, err := v.codec.Decode(e.Type, e.Data)
			if err != nil {
				return nil, fmt.Errorf("read the attempts of %s: %w", deliveryID, err)
			}
			for _, ev := range domain.Expand(ev) {
				switch p := ev.(type) {
				case domain.ForwardResponded:
					if p.AttemptID == o.attempt {
						if out[o.attempt], err = responded(p, p.Body, nil); err != nil {
							return nil, fmt.Errorf("read the attempts of %s: %w", deliveryID, err)
						}
					}
				case domain.ForwardFailed:
					if p.AttemptID == o.attempt {
						out[o.attempt] = readmodel.AttemptResponse{Status: p.Status, Headers: []domain.Header{}, Error: p.Error}
					}
				}
			}
		}
	}
	return out, nil
}

// attemptOutcome is where the views say an attempt's latest outcome is in
// the log, and the status and error they keep of it.
type attemptOutcome struct {
	attempt  string
	position uint64
	status   int
	errText  string
}

// outcomes lists a delivery's attempts with an outcome (those named in
// only, every one when it names none), in the log's order, and the bytes
// the views count of the delivery in the log (deliveries.stored_bytes).
func (v *History) outcomes(ctx context.Context, deliveryID string, only []string) (out []attemptOutcome, stored int64, err error) {
	rows, err := v.r.QueryContext(ctx, `SELECT a.attempt_id, a.outcome_position, COALESCE(a.status, 0), COALESCE(a.error, ''), d.stored_bytes
		FROM attempts a JOIN deliveries d ON d.position = a.delivery_position
		WHERE d.id = ? AND a.outcome_position IS NOT NULL ORDER BY a.outcome_position`, deliveryID)
	if err != nil {
		return nil, 0, fmt.Errorf("list the outcomes of %s: %w", deliveryID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var o attemptOutcome
		if err := rows.Scan(&o.attempt, &o.position, &o.status, &o.errText, &stored); err != nil {
			return nil, 0, fmt.Errorf("list the outcomes of %s: %w", deliveryID, err)
		}
		if len(only) == 0 || slices.Contains(only, o.attempt) {
			out = append(out, o)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list the outcomes of %s: %w", deliveryID, err)
	}
	return out, stored, nil
}

// readAt reads the event at position pos, in the reader's share of the
// log's reads; ok is false when the log has none there (deleted).
func (v *History) readAt(ctx context.Context, pos uint64) (domain.RecordedEvent, bool, error) {
	if pos == 0 {
		return domain.RecordedEvent{}, false, nil
	}
	if key := readmodel.ReaderOf(ctx); key != "" {
		release, err := v.logShares.Take(ctx, key, logReadShare)
		if err != nil {
			return domain.RecordedEvent{}, false, fmt.Errorf("wait for the reader's share of the log's reads: %w", err)
		}
		defer release()
	}
	events, err := v.store.ReadAll(ctx, pos-1, 1)
	if err != nil || len(events) == 0 || events[0].Position != pos {
		return domain.RecordedEvent{}, false, err
	}
	return events[0], true, nil
}
