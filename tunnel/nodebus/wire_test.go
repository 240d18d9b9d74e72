package nodebus

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
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
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, c := range wireCommands() {
		got, err := decodeCommand(encodeCommand(c))
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Errorf("command %s: got %+v, %v\nwant %+v", c.AttemptID, got, err, c)
		}
	}
	for _, r := range wireReplies() {
		got, err := decodeReply(encodeReply(r))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("reply %s: got %+v, %v\nwant %+v", r.Outcome.AttemptID, got, err, r)
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
		f.Add(encodeReply(r))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeCommand(b); err == nil {
			if again, err := decodeCommand(encodeCommand(c)); err != nil || !reflect.DeepEqual(again, c) {
				t.Errorf("command %+v came back as %+v, %v", c, again, err)
			}
		}
		if r, err := decodeReply(b); err == nil {
			if again, err := decodeReply(encodeReply(r)); err != nil || !reflect.DeepEqual(again, r) {
				t.Errorf("reply %+v came back as %+v, %v", r, again, err)
			}
		}
	})
}
