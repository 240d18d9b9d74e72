package domain

import (
	"encoding/json"
)

// JSON cannot carry bytes that are not valid UTF-8 (encoding/json turns
// them into U+FFFD), yet HTTP allows them in header values (obs-text) and
// senders put them in request targets. A recorded request must keep them,
// so such a string is stored twice: as text, for readers of the log, and
// as its exact bytes in base64 under a sibling key ending in "_b64", which
// decoding prefers. Valid UTF-8 is stored as before, without the sibling,
// so existing events and golden files are unchanged and still decode.

// headerJSON is Header's stored form without its methods.
type headerJSON Header

// MarshalJSON implements json.Marshaler, byte for byte as json.Marshal
// wrote headerJSON (with value_b64 for a value that is not UTF-8): every
// recorded request and answer has a dozen headers, and json.Marshal's
// reflection for each was about 5 % of the relay's CPU per proxied
// delivery.
func (h Header) MarshalJSON() ([]byte, error) {
	return appendHeader(make([]byte, 0, len(h.Name)+len(h.Value)+22), h), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (h *Header) UnmarshalJSON(b []byte) error {
	var v struct {
		headerJSON
		ValueB64 []byte `json:"value_b64"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*h = Header(v.headerJSON)
	if v.ValueB64 != nil {
		h.Value = string(v.ValueB64)
	}
	return nil
}

// receivedJSON is DeliveryReceived's stored form without its methods.
type receivedJSON DeliveryReceived

// MarshalJSON implements json.Marshaler: the fields as encoding/json
// writes receivedJSON, and a target that is not UTF-8 again as target_b64
// (see eventjson.go).
func (e DeliveryReceived) MarshalJSON() ([]byte, error) {
	return appendReceived(make([]byte, 0, receivedSize(e)), e), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (e *DeliveryReceived) UnmarshalJSON(b []byte) error {
	var v struct {
		receivedJSON
		TargetB64 []byte `json:"target_b64"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = DeliveryReceived(v.receivedJSON)
	if v.TargetB64 != nil {
		e.Target = string(v.TargetB64)
	}
	return nil
}
