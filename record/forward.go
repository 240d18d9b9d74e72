package record

import (
	"time"

	"github.com/relayhq/relay/domain"
)

// Forward is what one attempt carries to the local target.
type Forward struct {
	DeliveryID, AttemptID string
	EndpointID, AccountID string
	Method, Target        string
	Headers               []domain.Header // as received; hop-by-hop ones are dropped here
	Body                  []byte          // the whole body, not only the stored part
	Timeout               time.Duration
	CaptureResponse       bool
	// Host, Scheme and RemoteAddr are the public host the sender called,
	// how, and the sender's address (see domain.ForwardCommand).
	Host, Scheme, RemoteAddr string
	// CopiesRecorded is how many copies the delivery has recorded
	// (domain.ForwardCommand.CopiesRecorded).
	CopiesRecorded int
}

// NewForward is the one builder of a forward command, for a first attempt
// and a retry alike. requestEventID and requestRevision name the attempt's
// forward.requested.v1 in the delivery stream, so its outcome is appended
// right after it without replaying the stream (the fast path of
// RecordOutcome).
func NewForward(f Forward, requestEventID string, requestRevision uint64) domain.ForwardCommand {
	return domain.ForwardCommand{
		DeliveryID:      f.DeliveryID,
		AttemptID:       f.AttemptID,
		EndpointID:      f.EndpointID,
		AccountID:       f.AccountID,
		Method:          f.Method,
		Target:          f.Target,
		Headers:         domain.StripHopByHop(f.Headers),
		Body:            f.Body,
		Timeout:         f.Timeout,
		CaptureResponse: f.CaptureResponse,
		CorrelationID:   f.DeliveryID,
		RequestEventID:  requestEventID,
		RequestRevision: requestRevision,
		Host:            f.Host,
		Scheme:          f.Scheme,
		RemoteAddr:      f.RemoteAddr,
		CopiesRecorded:  f.CopiesRecorded,
	}
}
