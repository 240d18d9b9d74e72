package nodebus

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/binwire"
)

func wireCommands() []domain.ForwardCommand {
	return []domain.ForwardCommand{
		{
			DeliveryID: "d1", AttemptID: "a1", EndpointID: "ep1", AccountID: "acc1", Method: "POST",
			Target:  "/a%2Fb//c/?x=1&x=2&l=caf\xe9",
			Headers: []domain.Header{{Name: "X-Sig", Value: "one"}, {Name: "X-Sig", Value: "two"}, {Name: "Empty", Value: ""}, {Name: "X-Latin1", Value: "\xe9\xff"}},
			Body:    []byte{0, 1, 2, 0xff, '\n'}, Timeout: 30 * time.Second, CaptureResponse: true,
			CorrelationID: "d1", RequestEventID: "0190f3e2-0000-7000-8000-000000000001", RequestRevision: 1 << 40,
			Host: "ep1.relay.example.com", Scheme: "https", RemoteAddr: "[2001:db8::1]:443", Agent: "conn-1/ep1", Copy: true,
		},
		{AttemptID: "a2", Method: "GET", Target: "/", Headers: []domain.Header{}, Body: []byte{}, Timeout: -1},
	}
}

func wireReplies() []reply {
	return []reply{
		{Outcome: domain.ForwardOutcome{AttemptID: "a1", Status: 201,
			Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Multi", Value: "a"}, {Name: "X-Latin1", Value: "caf\xe9"}},
			Body:    []byte(`{"ok":true}`), DurationMs: 12, AgentID: "ag1", Position: 1 << 40}},
		{Outcome: domain.ForwardOutcome{AttemptID: "a2", Status: 502, Headers: []domain.Header{}, Body: []byte{},
			Error:   "nothing listening on 127.0.0.1:3000 (dial tcp 127.0.0.1:3000: connect: connection refused)",
			Failure: "nothing listening on 127.0.0.1:3000", DurationMs: 1}},
		{Outcome: domain.ForwardOutcome{AttemptID: "a3", Headers: []domain.Header{}, Body: []byte{}}, Error: "record attempt a3: disk full"},
		{Outcome: domain.ForwardOutcome{AttemptID: "a4", Status: 200, Headers: []domain.Header{}, Body: []byte("ok"), DurationMs: 3, AgentID: "ag2",
			Signature: "stripe expired timestamp (signed 12m0s from now)",
			Receipt:   &domain.FidelityDigests{RequestLine: strings.Repeat("a", 64), Headers: strings.Repeat("b", 64), Body: strings.Repeat("c", 64)}}},
		{Outcome: domain.ForwardOutcome{AttemptID: "a5", Status: 204, Headers: []domain.Header{}, Body: []byte{}, Signature: "github valid"}},
	}
}

// withoutV4 is r as a reply of version 3 carries it.
func withoutV4(r reply) reply {
	r.Outcome.Signature, r.Outcome.Receipt = "", nil
	return r
}

// decodeReplyV3 is decodeReply as nodes of reply version 3 have it,
// kept unchanged to show what they read.
func decodeReplyV3(b []byte) (reply, error) {
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

func TestWireRoundTrip(t *testing.T) {
	for _, c := range wireCommands() {
		got, err := decodeCommand(encodeCommand(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("command %s: got %+v, %v\nwant %+v", c.AttemptID, got, err, c)
		}
	}
	for _, r := range wireReplies() {
		got, err := decodeReply(encodeReply(r, wireReplyV4))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("reply %s: got %+v, %v\nwant %+v", r.Outcome.AttemptID, got, err, r)
		}
		// Version 3, written for an older node and by one, reads as it
		// always did, by the older node's decoder and by this one.
		v3 := encodeReply(r, wireReplyV3)
		for name, decode := range map[string]func([]byte) (reply, error){"v3 decoder": decodeReplyV3, "decoder": decodeReply} {
			if got, err := decode(v3); err != nil || !reflect.DeepEqual(got, withoutV4(r)) {
				t.Errorf("reply %s in version 3, %s: got %+v, %v\nwant %+v", r.Outcome.AttemptID, name, got, err, withoutV4(r))
			}
		}
	}
}

func TestWireRefusesMalformedMessages(t *testing.T) {
	good := encodeCommand(wireCommands()[0])
	tests := []struct {
		name string
		msg  []byte
	}{
		{"empty", nil},
		{"other version", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-3]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"length past the end", []byte{wireCommandV3, 0xff, 0x01}},
		{"JSON from an older node", []byte(`{"delivery_id":"d1"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeCommand(tt.msg); !errors.Is(err, errWire) {
				t.Errorf("decodeCommand: %v, want a malformed-message error", err)
			}
			if _, err := decodeReply(tt.msg); !errors.Is(err, errWire) {
				t.Errorf("decodeReply: %v, want a malformed-message error", err)
			}
		})
	}
}

// FuzzWireDecode feeds arbitrary bytes to both decoders: they must never
// panic, and whatever they accept must survive an encode and decode
// unchanged (the bytes may differ: a varint can be written longer).
func FuzzWireDecode(f *testing.F) {
	for _, c := range wireCommands() {
		f.Add(encodeCommand(c))
	}
	for _, r := range wireReplies() {
		f.Add(encodeReply(r, wireReplyV3))
		f.Add(encodeReply(r, wireReplyV4))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeCommand(b); err == nil {
			if again, err := decodeCommand(encodeCommand(c)); err != nil || !reflect.DeepEqual(again, c) {
				t.Errorf("command %+v came back as %+v, %v", c, again, err)
			}
		}
		if r, err := decodeReply(b); err == nil {
			if again, err := decodeReply(encodeReply(r, b[0])); err != nil || !reflect.DeepEqual(again, r) {
				t.Errorf("reply %+v came back as %+v, %v", r, again, err)
			}
		}
	})
}
