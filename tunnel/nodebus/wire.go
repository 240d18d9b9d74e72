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

const (
	wireCommandV3 = 3 // 1 had no host, scheme and sender address, 2 no session named
	wireReplyV3   = 3 // 1 had no log position, 2 no failure text
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

func encodeReply(rep reply) []byte {
	o := rep.Outcome
	w := binwire.Writer{B: make([]byte, 0, 128+len(o.Body))}
	w.Byte(wireReplyV3)
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
	return w.B
}

func decodeReply(b []byte) (reply, error) {
	r := binwire.NewReader(b)
	r.Expect(wireReplyV3)
	rep := reply{Outcome: domain.ForwardOutcome{
		AttemptID: r.Str(), Status: int(r.Int()), Headers: r.Headers(busHeaders, busHeaderBytes), Body: r.Bytes(),
		Error: r.Str(), Failure: r.Str(), DurationMs: r.Int(), AgentID: r.Str(), Position: r.Uint(),
	}}
	rep.Error = r.Str()
	if err := r.End("forward reply"); err != nil {
		return reply{}, err
	}
	return rep, nil
}
