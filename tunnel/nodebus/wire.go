package nodebus

import (
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/binwire"
)

// Forward commands and replies cross the bus in binwire's encoding rather
// than JSON: they carry whole request and response bodies, and JSON spent a
// base64 encoding and a full scan on each of them twice per proxied
// request, several percent of the relay's CPU. The first byte is a format
// version, so a node of another version is refused rather than misread
// (several nodes may share a distributed Pub/Sub).
//
// A reply of version 4 adds the agent's signature verdict and fidelity
// receipt. A node of version 3 refuses it, so a reply is written in
// version 4 only to a Client whose command announced it reads it
// (replyWireKey); nodes of either version run side by side during a
// rolling upgrade, and a node of version 3 still gets what it reads.

const (
	wireCommandV3 = 3 // 1 had no host, scheme and sender address, 2 no session named
	wireReplyV3   = 3 // 1 had no log position, 2 no failure text
	wireReplyV4   = 4 // 3 had no signature verdict and receipt
)

// busHeaders and busHeaderBytes bound a header list read from the bus only
// by the largest message binwire reads: the bus is between the relay's own
// nodes, and every list on it was bounded where it came in (a sender's
// request by --max-header-bytes, an agent's answer by
// agentwire.MaxAnswerHeaders and MaxAnswerHeaderBytes).
const busHeaders, busHeaderBytes = binwire.MaxLen, binwire.MaxLen

// errWire is a bus message that does not decode.
var errWire = binwire.ErrMalformed

func encodeCommand(c domain.ForwardCommand) []byte {
	w := binwire.Writer{B: make([]byte, 0, 256+len(c.Body))}
	w.Byte(wireCommandV3)
	w.Str(c.DeliveryID)
	w.Str(c.AttemptID)
	w.Str(c.EndpointID)
	w.Str(c.AccountID)
	w.Str(c.Method)
	w.Str(c.Target)
	w.Headers(c.Headers)
	w.Bytes(c.Body)
	w.Int(int64(c.Timeout))
	w.Bool(c.CaptureResponse)
	w.Str(c.CorrelationID)
	w.Str(c.RequestEventID)
	w.Uint(c.RequestRevision)
	w.Str(c.Host)
	w.Str(c.Scheme)
	w.Str(c.RemoteAddr)
	w.Str(c.Agent)
	w.Bool(c.Copy)
	return w.B
}

func decodeCommand(b []byte) (domain.ForwardCommand, error) {
	r := binwire.NewReader(b)
	r.Expect(wireCommandV3)
	c := domain.ForwardCommand{
		DeliveryID: r.Str(), AttemptID: r.Str(), EndpointID: r.Str(), AccountID: r.Str(),
		Method: r.Str(), Target: r.Str(), Headers: r.Headers(busHeaders, busHeaderBytes), Body: r.Bytes(),
		Timeout: time.Duration(r.Int()), CaptureResponse: r.Bool(), CorrelationID: r.Str(),
		RequestEventID: r.Str(), RequestRevision: r.Uint(),
		Host: r.Str(), Scheme: r.Str(), RemoteAddr: r.Str(), Agent: r.Str(), Copy: r.Bool(),
	}
	if err := r.End("forward command"); err != nil {
		return domain.ForwardCommand{}, err
	}
	return c, nil
}

// encodeReply writes rep in version (wireReplyV3 or wireReplyV4); version 3
// leaves out the signature verdict and the receipt.
func encodeReply(rep reply, version byte) []byte {
	o := rep.Outcome
	w := binwire.Writer{B: make([]byte, 0, 128+len(o.Body))}
	w.Byte(version)
	w.Str(o.AttemptID)
	w.Int(int64(o.Status))
	w.Headers(o.Headers)
	w.Bytes(o.Body)
	w.Str(o.Error)
	w.Str(o.Failure)
	w.Int(o.DurationMs)
	w.Str(o.AgentID)
	w.Uint(o.Position)
	w.Str(rep.Error)
	if version >= wireReplyV4 {
		w.Str(o.Signature)
		w.Bool(o.Receipt != nil)
		if o.Receipt != nil {
			w.Str(o.Receipt.RequestLine)
			w.Str(o.Receipt.Headers)
			w.Str(o.Receipt.Body)
		}
	}
	return w.B
}

// decodeReply reads a reply of version 3 or 4.
func decodeReply(b []byte) (reply, error) {
	r := binwire.NewReader(b)
	version := byte(wireReplyV3)
	if len(b) > 0 && b[0] == wireReplyV4 {
		version = wireReplyV4
	}
	r.Expect(version)
	rep := reply{Outcome: domain.ForwardOutcome{
		AttemptID: r.Str(), Status: int(r.Int()), Headers: r.Headers(busHeaders, busHeaderBytes), Body: r.Bytes(),
		Error: r.Str(), Failure: r.Str(), DurationMs: r.Int(), AgentID: r.Str(), Position: r.Uint(),
	}}
	rep.Error = r.Str()
	if version >= wireReplyV4 {
		rep.Outcome.Signature = r.Str()
		if r.Bool() {
			rep.Outcome.Receipt = &domain.FidelityDigests{RequestLine: r.Str(), Headers: r.Str(), Body: r.Str()}
		}
	}
	if err := r.End("forward reply"); err != nil {
		return reply{}, err
	}
	return rep, nil
}
