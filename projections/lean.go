package projections

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
)

// The two delivery events that carry a request or a response are decoded
// here rather than by the codec: the views keep no headers or bodies (they
// are read back from the log when a delivery is read, see log.go), so
// decoding a body's base64 text and allocating its bytes and header list
// for every delivery would be wasted. Each lean struct has every field of
// its domain payload except Headers and Body, with the same JSON names; a
// test holds them to the codec field by field.
//
// Headers and Body are still checked for their JSON kind, and every other
// field is decoded with its type, so a payload the codec rejects is
// rejected here too and skipped alike. (Left unchecked: the base64 text of
// a body and the fields inside each header. The relay's own codec writes
// both, and a reader of such a delivery gets the codec's error.)

// receivedRow is what the deliveries row keeps of a DeliveryReceived.
type receivedRow struct {
	DeliveryID  string             `json:"delivery_id"`
	Address     string             `json:"address"`
	AddressKind domain.AddressKind `json:"address_kind"`
	AccountID   string             `json:"account_id"`
	Method      string             `json:"method"`
	Target      string             `json:"target"`
	Host        string             `json:"host"`
	Proto       string             `json:"proto"`
	RemoteAddr  string             `json:"remote_addr"`
	BodySize    int64              `json:"body_size"`
	Complete    bool               `json:"complete"`
	// DroppedHeaders is decoded only to check it: the count is read back
	// from the log with the headers.
	DroppedHeaders int `json:"dropped_headers"`
	// Answer, when set, is what the relay answered as it received the
	// request: the delivery is answered from its first event on.
	Answer     *domain.ReceiptAnswer `json:"answer"`
	BodyUnread bool                  `json:"body_unread"`
	// Scheme and Peer are read back from the log with the headers.
	Scheme string `json:"scheme"`
	Peer   string `json:"peer"`
	// Provider is kept in the row: history is searched and grouped by it.
	Provider *domain.Provider `json:"provider"`
	// Queued: a QUEUE Endpoint's delivery (the queue view).
	Queued bool `json:"queued"`
	// Forward is the first attempt, when requested at receipt.
	Forward *forwardRow `json:"forward"`

	Headers  jsonKind `json:"headers"`  // left in the log
	Body     jsonKind `json:"body"`     // left in the log
	Trailers jsonKind `json:"trailers"` // left in the log
	// RedactedQuery is read back from the log with the headers.
	RedactedQuery jsonKind `json:"redacted_query"`
}

// forwardRow is what the views keep of a receipt's Forward
// (domain.ReceiptForward).
type forwardRow struct {
	AttemptID  string `json:"attempt_id"`
	EndpointID string `json:"endpoint_id"`
	Node       string `json:"node"`
	// Responded is the attempt's answer when the receipt records it.
	Responded *respondedRow `json:"responded"`
}

// requested is the ForwardRequested the receipt's first attempt stands for
// (domain.ReceiptForward.Requested).
func (f forwardRow) requested(deliveryID string) domain.ForwardRequested {
	return domain.ReceiptForward{AttemptID: f.AttemptID, EndpointID: f.EndpointID, Node: f.Node}.Requested(deliveryID)
}

// respondedRow is what the views keep of a ForwardResponded.
type respondedRow struct {
	DeliveryID string `json:"delivery_id"`
	AttemptID  string `json:"attempt_id"`
	AgentID    string `json:"agent_id"`
	Status     int    `json:"status"`
	BodySize   int64  `json:"body_size"`
	Captured   bool   `json:"captured"`
	DurationMs int64  `json:"duration_ms"`
	Signature  string `json:"signature"`
	// Fidelity is kept in the row as its verdict (see the attempts table).
	Fidelity *domain.Fidelity `json:"fidelity"`
	Copy     bool             `json:"copy"`
	// DroppedHeaders is decoded only to check it: the count is read back
	// from the log with the headers.
	DroppedHeaders int `json:"dropped_headers"`

	Headers jsonKind `json:"headers"` // left in the log
	Body    jsonKind `json:"body"`    // left in the log
	// NotCaptured is left in the log: the history reads it back with the
	// answer's headers.
	NotCaptured jsonKind `json:"not_captured"`
}

// jsonKind records the first byte of a JSON value without decoding it: '"'
// for a string, '[' for an array, 'n' for null, 0 when the field is absent.
// encoding/json hands UnmarshalJSON a slice of the input, so this costs
// the scan json.Unmarshal does anyway and no allocation.
type jsonKind byte

// UnmarshalJSON implements json.Unmarshaler.
func (k *jsonKind) UnmarshalJSON(b []byte) error {
	if len(b) > 0 {
		*k = jsonKind(b[0])
	}
	return nil
}

// is reports whether the value was absent, null or of the kind want.
func (k jsonKind) is(want byte) bool { return k == 0 || k == 'n' || byte(k) == want }

var errLeanKind = errors.New("headers must be an array and body a base64 string")

// receivedRowOf is decodeReceived of what the codec encodes p to, read
// from p itself (TestRowsOfPayloadsAgreeWithDecoding).
func receivedRowOf(p domain.DeliveryReceived) receivedRow {
	return receivedRow{
		DeliveryID: p.DeliveryID, Address: p.Address, AddressKind: p.AddressKind, AccountID: p.AccountID,
		Method: p.Method, Target: p.Target, Host: p.Host, Proto: p.Proto, RemoteAddr: p.RemoteAddr,
		BodySize: p.BodySize, Complete: p.Complete, DroppedHeaders: p.DroppedHeaders,
		Answer: p.Answer, BodyUnread: p.BodyUnread, Scheme: p.Scheme, Peer: p.Peer,
		Provider: p.Provider, Queued: p.Queued, Forward: forwardRowOf(p.Forward),
	}
}

// forwardRowOf is what decodeReceived reads of f as the codec encodes it.
func forwardRowOf(f *domain.ReceiptForward) *forwardRow {
	if f == nil {
		return nil
	}
	row := &forwardRow{AttemptID: f.AttemptID, EndpointID: f.EndpointID, Node: f.Node}
	if f.Responded != nil {
		r := respondedRowOf(*f.Responded)
		row.Responded = &r
	}
	return row
}

// respondedRowOf is decodeResponded of what the codec encodes p to.
func respondedRowOf(p domain.ForwardResponded) respondedRow {
	return respondedRow{
		DeliveryID: p.DeliveryID, AttemptID: p.AttemptID, AgentID: p.AgentID, Status: p.Status,
		BodySize: p.BodySize, Captured: p.Captured, DurationMs: p.DurationMs, Signature: p.Signature,
		Fidelity: p.Fidelity, Copy: p.Copy, DroppedHeaders: p.DroppedHeaders,
	}
}

func decodeReceived(data []byte) (receivedRow, error) {
	if p, ok := fastReceived(data); ok {
		return p, nil
	}
	return decodeReceivedJSON(data)
}

// decodeReceivedJSON is decodeReceived through encoding/json, for every
// payload fastReceived leaves to it.
func decodeReceivedJSON(data []byte) (receivedRow, error) {
	// A target that is not UTF-8 is stored with its exact bytes beside the
	// text (see domain.DeliveryReceived.MarshalJSON); the view keeps those.
	var v struct {
		receivedRow
		TargetB64 []byte `json:"target_b64"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return receivedRow{}, fmt.Errorf("decode %s: %w", domain.TypeDeliveryReceived, err)
	}
	p := v.receivedRow
	if v.TargetB64 != nil {
		p.Target = string(v.TargetB64)
	}
	if !p.Headers.is('[') || !p.Body.is('"') || !p.Trailers.is('[') {
		return receivedRow{}, fmt.Errorf("decode %s: %w", domain.TypeDeliveryReceived, errLeanKind)
	}
	if f := p.Forward; f != nil && f.Responded != nil && (!f.Responded.Headers.is('[') || !f.Responded.Body.is('"')) {
		return receivedRow{}, fmt.Errorf("decode %s: %w", domain.TypeDeliveryReceived, errLeanKind)
	}
	return p, nil
}

func decodeResponded(data []byte) (respondedRow, error) {
	if p, ok := fastResponded(data); ok {
		return p, nil
	}
	return decodeRespondedJSON(data)
}

// decodeRespondedJSON is decodeResponded through encoding/json, for every
// payload fastResponded leaves to it.
func decodeRespondedJSON(data []byte) (respondedRow, error) {
	var p respondedRow
	if err := json.Unmarshal(data, &p); err != nil {
		return respondedRow{}, fmt.Errorf("decode %s: %w", domain.TypeForwardResponded, err)
	}
	if !p.Headers.is('[') || !p.Body.is('"') {
		return respondedRow{}, fmt.Errorf("decode %s: %w", domain.TypeForwardResponded, errLeanKind)
	}
	return p, nil
}
