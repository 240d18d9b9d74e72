package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// Codec turns payloads into EventData and back. Its registry is built
// explicitly in NewCodec (never in init) so the catalogue is in one place.
type Codec struct {
	decoders map[string]func([]byte) (Event, error)
}

func decoderFor[T Event]() func([]byte) (Event, error) {
	return func(b []byte) (Event, error) {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
}

// NewCodec returns a codec that knows the whole catalogue.
func NewCodec() *Codec {
	return &Codec{decoders: map[string]func([]byte) (Event, error){
		TypeInspectorCreated:       decoderFor[InspectorCreated](),
		TypeInspectorExpired:       decoderFor[InspectorExpired](),
		TypeAccountCreated:         decoderFor[AccountCreated](),
		TypeAccountQuotaSet:        decoderFor[AccountQuotaSet](),
		TypeAccountSnapshot:        decoderFor[AccountSnapshot](),
		TypeTokenIssued:            decoderFor[TokenIssued](),
		TypeTokenRevoked:           decoderFor[TokenRevoked](),
		TypeTokenUsed:              decoderFor[TokenUsed](),
		TypeDeviceCodeRequested:    decoderFor[DeviceCodeRequested](),
		TypeDeviceApproved:         decoderFor[DeviceApproved](),
		TypeDeviceDenied:           decoderFor[DeviceDenied](),
		TypeDeviceRedeemed:         decoderFor[DeviceRedeemed](),
		TypeInviteCreated:          decoderFor[InviteCreated](),
		TypeInviteUsed:             decoderFor[InviteUsed](),
		TypeMemberJoined:           decoderFor[MemberJoined](),
		TypeMemberRemoved:          decoderFor[MemberRemoved](),
		TypeMemberRoleChanged:      decoderFor[MemberRoleChanged](),
		TypeMemberPasswordChanged:  decoderFor[MemberPasswordChanged](),
		TypeMemberInvited:          decoderFor[MemberInvited](),
		TypeMemberInviteUsed:       decoderFor[MemberInviteUsed](),
		TypeLoginClaimed:           decoderFor[LoginClaimed](),
		TypeLoginReleased:          decoderFor[LoginReleased](),
		TypeEndpointCreated:        decoderFor[EndpointCreated](),
		TypeEndpointReconfigured:   decoderFor[EndpointReconfigured](),
		TypeEndpointDeleted:        decoderFor[EndpointDeleted](),
		TypeEndpointSmeeKeySet:     decoderFor[EndpointSmeeKeySet](),
		TypeAgentConnected:         decoderFor[AgentConnected](),
		TypeAgentDisconnected:      decoderFor[AgentDisconnected](),
		TypePrimaryChanged:         decoderFor[PrimaryChanged](),
		TypeListenersSnapshot:      decoderFor[ListenersSnapshot](),
		TypeDeliveryReceived:       decoderFor[DeliveryReceived](),
		TypeDeliveryAnswered:       decoderFor[DeliveryAnswered](),
		TypeForwardRequested:       decoderFor[ForwardRequested](),
		TypeForwardResponded:       decoderFor[ForwardResponded](),
		TypeForwardFailed:          decoderFor[ForwardFailed](),
		TypeRetryRequested:         decoderFor[RetryRequested](),
		TypeInspectorPurged:        decoderFor[InspectorPurged](),
		TypeEndpointRetained:       decoderFor[EndpointRetained](),
		TypeAddressRateLimited:     decoderFor[AddressRateLimited](),
		TypeStreamDeleted:          decoderFor[StreamDeleted](),
		TypeLogCheckpointed:        decoderFor[LogCheckpointed](),
		TypeInspectorAnswerSet:     decoderFor[InspectorAnswerSet](),
		TypeDeliveryRetryScheduled: decoderFor[DeliveryRetryScheduled](),
		TypeDeliveryDead:           decoderFor[DeliveryDead](),
		TypeDeliveryDelivered:      decoderFor[DeliveryDelivered](),
		TypeDeliveryRequeued:       decoderFor[DeliveryRequeued](),
	}}
}

// Types lists every registered type name.
func (c *Codec) Types() []string {
	out := make([]string, 0, len(c.decoders))
	for t := range c.decoders {
		out = append(out, t)
	}
	return out
}

// Trace links an event to the request that caused it.
type Trace struct {
	CorrelationID string
	CausationID   string
}

// Encode wraps a payload in an envelope. id must be a UUID.
func (c *Codec) Encode(id string, e Event, at time.Time, tr Trace) (EventData, error) {
	if _, ok := c.decoders[e.EventType()]; !ok {
		return EventData{}, fmt.Errorf("encode %T: %w %q", e, ErrUnknownEventType, e.EventType())
	}
	b, err := marshal(e)
	if err != nil {
		return EventData{}, fmt.Errorf("encode %s: %w", e.EventType(), err)
	}
	return EventData{
		ID:      id,
		Type:    e.EventType(),
		Data:    b,
		Payload: e,
		Metadata: Metadata{
			SchemaVersion: 1,
			OccurredAt:    at.UTC(),
			CorrelationID: tr.CorrelationID,
			CausationID:   tr.CausationID,
		},
	}, nil
}

// EncodeAll encodes the events of one append. Event i gets ids[i]; IDs
// missing from ids are made with newID and added, and the IDs used are
// returned, so a caller retrying the append can pass them again and the
// retry stays idempotent. All events share at and tr.CorrelationID; the
// first carries tr.CausationID and is the cause of the others.
func (c *Codec) EncodeAll(ids []string, newID func() string, events []Event, at time.Time, tr Trace) ([]EventData, []string, error) {
	for len(ids) < len(events) {
		ids = append(ids, newID())
	}
	out := make([]EventData, len(events))
	for i, e := range events {
		d, err := c.Encode(ids[i], e, at, tr)
		if err != nil {
			return nil, ids, err
		}
		out[i] = d
		tr.CausationID = ids[0]
	}
	return out, ids, nil
}

// Decode returns the payload of a stored event.
func (c *Codec) Decode(typ string, data []byte) (Event, error) {
	d, ok := c.decoders[typ]
	if !ok {
		return nil, fmt.Errorf("decode: %w %q", ErrUnknownEventType, typ)
	}
	e, err := d(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", typ, err)
	}
	return e, nil
}

// marshal is json.Marshal(e) without its second pass over a Marshaler's
// output: json.Marshal compacts and HTML-escapes what MarshalJSON returns,
// which for a DeliveryReceived (whose MarshalJSON writes it by hand,
// already compact and escaped) meant scanning the whole encoded body
// again — most of the cost of recording a delivery's event. A
// ForwardResponded, which has no MarshalJSON, is written by hand here.
func marshal(e Event) ([]byte, error) {
	if r, ok := e.(ForwardResponded); ok {
		return appendResponded(make([]byte, 0, respondedSize(r)), r), nil
	}
	if m, ok := e.(json.Marshaler); ok {
		return m.MarshalJSON()
	}
	return json.Marshal(e)
}
