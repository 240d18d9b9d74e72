// Package agentwire is the binary data path between the relay and its
// agents. An agent that offers Subprotocol on the API's WebSocket (beside
// graphql-transport-ws) still signs in, asks for its Endpoints and
// subscribes to forwardRequests in graphql-transport-ws messages, as every
// GraphQL client does; only the hot path changes: each forward request
// arrives as one binary Forward frame instead of a GraphQL result, and the
// agent answers with a binary Complete frame instead of a completeForward
// mutation; the relay answers a Complete it refuses with a Done frame (on
// the older subprotocols, every Complete). Bodies travel as bytes, not
// base64 in JSON, and nothing is parsed or executed as GraphQL per
// request. A relay that does not offer Subprotocol speaks
// plain graphql-transport-ws, and so does every third-party client.
//
// Every frame starts with its kind; the fields follow in binwire's
// encoding.
package agentwire

import (
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/binwire"
)

// Subprotocol is the WebSocket subprotocol an agent offers first; the
// relay speaks the older ones too, and an agent offers them next, newest
// first. The three differ in two things only:
//
//   - relay-agent.v1: Complete frames carry no fidelity receipt, and the
//     relay answers each with a Done frame;
//   - relay-agent.v2: Complete frames may carry a fidelity receipt, and the
//     relay answers each with a Done frame;
//   - relay-agent.v3 (Subprotocol): as v2, but the relay sends a Done frame
//     only for a Complete it refuses. An answer taken needs no reply: the
//     agent does not wait for one, and neither side spends a frame on it.
//
// So an agent sends receipts only to a relay that records them, and waits
// for a Done frame only from a relay that sends one for every Complete.
const (
	Subprotocol   = "relay-agent.v3"
	SubprotocolV2 = "relay-agent.v2"
	SubprotocolV1 = "relay-agent.v1"
)

// Subprotocols are the binary subprotocols, newest first: what an agent
// offers before graphql-transport-ws.
var Subprotocols = []string{Subprotocol, SubprotocolV2, SubprotocolV1}

// Acknowledges tells whether a relay that agreed on proto answers every
// Complete frame with a Done frame (v1, v2), not only those it refuses.
func Acknowledges(proto string) bool { return proto == SubprotocolV2 || proto == SubprotocolV1 }

// CarriesReceipts tells whether Complete frames on proto may end with a
// fidelity receipt.
func CarriesReceipts(proto string) bool { return proto == Subprotocol || proto == SubprotocolV2 }

// Frame kinds.
const (
	KindForward  byte = 'F' // relay → agent: a request to forward
	KindComplete byte = 'C' // agent → relay: the local answer of one attempt
	KindDone     byte = 'D' // relay → agent: whether the relay took a Complete
)

// MaxAnswerHead is the most of a local answer's head the agent reads: the
// status line, the fields and the blank line, interim (1xx) answers
// included. Past it the agent answers 502 itself (agentcli's local client)
// and sends none of that head.
const MaxAnswerHead = 1 << 20

// MaxAnswerHeaders bounds the headers of an answer the relay takes from an
// agent (a C frame, a completeForward), and MaxAnswerHeaderBytes their
// names and values together; an answer past either is refused. Neither
// takes anything from the real agent: the shortest field line Go's
// http.ReadResponse reads is three bytes ("a:\n", bare LF accepted), so a
// head of MaxAnswerHead bytes holds fewer than MaxAnswerHead/3 fields, and
// their names and values are part of the head. Without the bound a frame
// of empty headers, two bytes each on the wire and 32 in a domain.Header,
// made the relay allocate 16 times the frame before it looked at the
// attempt; at the bound the list is at most 349 525 × 32 bytes ≈ 10.7 MiB,
// less than the frame a token socket may already send (about 14 MiB).
const (
	MaxAnswerHeaders     = MaxAnswerHead / 3
	MaxAnswerHeaderBytes = MaxAnswerHead
)

// forwardHeaders and forwardHeaderBytes bound a forward's headers only by
// the largest message binwire reads: the relay bounded them when the
// sender's request came in (--max-header-bytes), and the agent reads no
// message from it past agentcli.MaxRelayMessage.
const forwardHeaders, forwardHeaderBytes = binwire.MaxLen, binwire.MaxLen

// Kind is the kind of a frame, 0 for an empty one.
func Kind(frame []byte) byte {
	if len(frame) == 0 {
		return 0
	}
	return frame[0]
}

// Forward is a forward request of a forwardRequests subscription.
type Forward struct {
	Operation  string // the subscription's id
	AttemptID  string
	DeliveryID string
	Method     string
	Target     string // the raw request target, byte for byte
	Headers    []domain.Header
	Body       []byte
	Host       string
	Scheme     string
	RemoteAddr string
}

// ForwardSize is the length of f's frame, so that a buffer made for it
// holds the frame without growing (a guess beside the body's length missed
// the request's headers, and the frame grew and was copied on most
// forwards).
func ForwardSize(f Forward) int {
	n := 1 + binwire.HeadersLen(f.Headers) + binwire.StrLen(len(f.Body))
	for _, s := range [...]string{f.Operation, f.AttemptID, f.DeliveryID, f.Method, f.Target, f.Host, f.Scheme, f.RemoteAddr} {
		n += binwire.StrLen(len(s))
	}
	return n
}

// AppendForward appends f's frame to dst.
func AppendForward(dst []byte, f Forward) []byte {
	w := binwire.Writer{B: dst}
	w.Byte(KindForward)
	w.Str(f.Operation)
	w.Str(f.AttemptID)
	w.Str(f.DeliveryID)
	w.Str(f.Method)
	w.Str(f.Target)
	w.Headers(f.Headers)
	w.Bytes(f.Body)
	w.Str(f.Host)
	w.Str(f.Scheme)
	w.Str(f.RemoteAddr)
	return w.B
}

// DecodeForward reads a Forward frame; Body shares frame's memory and the
// strings (ids, target, headers, origin) share one copy of theirs: one
// allocation per frame instead of one per string.
func DecodeForward(frame []byte) (Forward, error) {
	r := binwire.NewReader(frame)
	r.Strings(len(frame) - forwardBodySize(frame))
	r.Expect(KindForward)
	f := Forward{
		Operation: r.Str(), AttemptID: r.Str(), DeliveryID: r.Str(), Method: r.Str(), Target: r.Str(),
		Headers: r.Headers(forwardHeaders, forwardHeaderBytes), Body: r.Bytes(), Host: r.Str(), Scheme: r.Str(), RemoteAddr: r.Str(),
	}
	if err := r.End("forward frame"); err != nil {
		return Forward{}, err
	}
	return f, nil
}

// forwardBodySize is the size of a Forward frame's body, 0 when the frame
// does not decode that far.
func forwardBodySize(frame []byte) int {
	r := binwire.NewReader(frame)
	r.Expect(KindForward)
	for range 5 { // operation, attempt, delivery, method, target
		r.Bytes()
	}
	// Each header takes at least two bytes, so a bogus count ends with
	// the frame.
	for n := r.Uint(); n > 0 && r.More(); n-- {
		r.Bytes()
		r.Bytes()
	}
	return len(r.Bytes())
}

// Complete is an agent's report of one attempt, as completeForward takes
// it: the local answer, or Error (and Failure, the text for the sender)
// when the local target gave none; Status 0 means none given.
type Complete struct {
	AttemptID  string
	Status     int
	Headers    []domain.Header
	Body       []byte
	Error      string
	Failure    string
	DurationMs int64
	// Signature is the verdict of a provider signature check the agent
	// made on the request (relay listen --verify), "" for none. The
	// frame may end before it: a frame without it decodes.
	Signature string
	// Receipt is the agent's digests of the request it handed to the local
	// process (domain.DigestRequest), nil for none. It follows Signature
	// (then written even when empty) as three strings, and a frame may end
	// before it: an older agent's frame decodes.
	Receipt *domain.FidelityDigests
}

// AppendComplete appends c's frame to dst.
func AppendComplete(dst []byte, c Complete) []byte {
	w := binwire.Writer{B: dst}
	w.Byte(KindComplete)
	w.Str(c.AttemptID)
	w.Int(int64(c.Status))
	w.Headers(c.Headers)
	w.Bytes(c.Body)
	w.Str(c.Error)
	w.Str(c.Failure)
	w.Int(c.DurationMs)
	if c.Signature != "" || c.Receipt != nil {
		w.Str(c.Signature)
	}
	if c.Receipt != nil {
		w.Str(c.Receipt.RequestLine)
		w.Str(c.Receipt.Headers)
		w.Str(c.Receipt.Body)
	}
	return w.B
}

// DecodeComplete reads a Complete frame; Body shares frame's memory and
// the strings (id, headers, error, verdict, receipt) share one copy of
// theirs, as in DecodeForward. A frame of more than MaxAnswerHeaders
// headers, of more than MaxAnswerHeaderBytes of names and values, or with
// a header without a name does not decode.
func DecodeComplete(frame []byte) (Complete, error) {
	r := binwire.NewReader(frame)
	r.Strings(len(frame) - completeBodySize(frame))
	r.Expect(KindComplete)
	c := Complete{AttemptID: r.Str(), Status: int(r.Int()), Headers: r.Headers(MaxAnswerHeaders, MaxAnswerHeaderBytes), Body: r.Bytes(),
		Error: r.Str(), Failure: r.Str(), DurationMs: r.Int()}
	if r.More() {
		c.Signature = r.Str()
	}
	if r.More() {
		c.Receipt = &domain.FidelityDigests{RequestLine: r.Str(), Headers: r.Str(), Body: r.Str()}
	}
	if err := r.End("complete frame"); err != nil {
		return Complete{}, err
	}
	return c, nil
}

// completeBodySize is the size of a Complete frame's body, 0 when the
// frame does not decode that far.
func completeBodySize(frame []byte) int {
	r := binwire.NewReader(frame)
	r.Expect(KindComplete)
	r.Bytes() // attempt
	r.Int()   // status
	for n := r.Uint(); n > 0 && r.More(); n-- {
		r.Bytes()
		r.Bytes()
	}
	return len(r.Bytes())
}

// Done answers a Complete: Code is empty when the relay took the answer
// (sent on v1 and v2 only), else the API's error code (NOT_FOUND: the
// relay no longer waits for the attempt; INVALID_INPUT: the report was
// invalid) with Message.
type Done struct {
	AttemptID string
	Code      string
	Message   string
}

// AppendDone appends d's frame to dst.
func AppendDone(dst []byte, d Done) []byte {
	w := binwire.Writer{B: dst}
	w.Byte(KindDone)
	w.Str(d.AttemptID)
	w.Str(d.Code)
	w.Str(d.Message)
	return w.B
}

// DecodeDone reads a Done frame.
func DecodeDone(frame []byte) (Done, error) {
	r := binwire.NewReader(frame)
	r.Expect(KindDone)
	d := Done{AttemptID: r.Str(), Code: r.Str(), Message: r.Str()}
	if err := r.End("done frame"); err != nil {
		return Done{}, err
	}
	return d, nil
}
