package domain

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// The two events of every proxied delivery, DeliveryReceived and
// ForwardResponded, are written by hand into one buffer sized up front,
// byte for byte as encoding/json writes them (field order, omitempty,
// base64 bodies, HTML escaping): json.Marshal's reflection, a buffer per
// header and its growing output were about 8 % of the relay's CPU per
// proxied delivery. Text that is not UTF-8 (a header, a target) keeps its
// own path, as it is rare; eventjson_test.go compares both with
// encoding/json.

// appendReceived appends e's JSON to b.
func appendReceived(b []byte, e DeliveryReceived) []byte {
	b = append(b, `{"delivery_id":`...)
	b = AppendJSONString(b, e.DeliveryID)
	b = append(b, `,"address":`...)
	b = AppendJSONString(b, e.Address)
	b = append(b, `,"address_kind":`...)
	b = AppendJSONString(b, string(e.AddressKind))
	if e.AccountID != "" {
		b = append(b, `,"account_id":`...)
		b = AppendJSONString(b, e.AccountID)
	}
	b = append(b, `,"method":`...)
	b = AppendJSONString(b, e.Method)
	b = append(b, `,"target":`...)
	b = AppendJSONString(b, e.Target)
	b = append(b, `,"host":`...)
	b = AppendJSONString(b, e.Host)
	b = append(b, `,"proto":`...)
	b = AppendJSONString(b, e.Proto)
	b = append(b, `,"remote_addr":`...)
	b = AppendJSONString(b, e.RemoteAddr)
	b = append(b, `,"headers":`...)
	b = appendHeaders(b, e.Headers)
	b = append(b, `,"body":`...)
	b = appendJSONBytes(b, e.Body)
	b = append(b, `,"body_size":`...)
	b = strconv.AppendInt(b, e.BodySize, 10)
	b = append(b, `,"complete":`...)
	b = strconv.AppendBool(b, e.Complete)
	if e.DroppedHeaders != 0 {
		b = append(b, `,"dropped_headers":`...)
		b = strconv.AppendInt(b, int64(e.DroppedHeaders), 10)
	}
	if len(e.RedactedQuery) > 0 {
		b = append(b, `,"redacted_query":[`...)
		for i, q := range e.RedactedQuery {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, q)
		}
		b = append(b, ']')
	}
	if e.BodyUnread {
		b = append(b, `,"body_unread":true`...)
	}
	if len(e.Trailers) > 0 {
		b = append(b, `,"trailers":`...)
		b = appendHeaders(b, e.Trailers)
	}
	if a := e.Answer; a != nil {
		b = append(b, `,"answer":{"status":`...)
		b = strconv.AppendInt(b, int64(a.Status), 10)
		if a.Reason != "" {
			b = append(b, `,"reason":`...)
			b = AppendJSONString(b, a.Reason)
		}
		b = append(b, '}')
	}
	if p := e.Provider; p != nil {
		b = append(b, `,"provider":{"name":`...)
		b = AppendJSONString(b, p.Name)
		if p.EventType != "" {
			b = append(b, `,"event_type":`...)
			b = AppendJSONString(b, p.EventType)
		}
		if p.DeliveryID != "" {
			b = append(b, `,"delivery_id":`...)
			b = AppendJSONString(b, p.DeliveryID)
		}
		b = append(b, '}')
	}
	if e.Scheme != "" {
		b = append(b, `,"scheme":`...)
		b = AppendJSONString(b, e.Scheme)
	}
	if e.Peer != "" {
		b = append(b, `,"peer":`...)
		b = AppendJSONString(b, e.Peer)
	}
	if e.Queued {
		b = append(b, `,"queued":true`...)
	}
	if f := e.Forward; f != nil {
		b = append(b, `,"forward":{"attempt_id":`...)
		b = AppendJSONString(b, f.AttemptID)
		b = append(b, `,"endpoint_id":`...)
		b = AppendJSONString(b, f.EndpointID)
		if f.Node != "" {
			b = append(b, `,"node":`...)
			b = AppendJSONString(b, f.Node)
		}
		if f.Responded != nil {
			b = append(b, `,"responded":`...)
			b = appendResponded(b, *f.Responded)
		}
		b = append(b, '}')
	}
	if !utf8.ValidString(e.Target) {
		b = append(b, `,"target_b64":`...)
		b = appendJSONBytes(b, []byte(e.Target))
	}
	return append(b, '}')
}

// receivedSize is about the size of e's JSON, enough for one allocation.
func receivedSize(e DeliveryReceived) int {
	n := 320 + base64.StdEncoding.EncodedLen(len(e.Body)) + headersSize(e.Headers) + headersSize(e.Trailers)
	n += len(e.DeliveryID) + len(e.Address) + len(e.AccountID) + len(e.Method) + 2*len(e.Target) + len(e.Host) +
		len(e.RemoteAddr) + len(e.Scheme) + len(e.Peer)
	for _, q := range e.RedactedQuery {
		n += len(q) + 3
	}
	if p := e.Provider; p != nil {
		n += len(p.Name) + len(p.EventType) + len(p.DeliveryID) + 64
	}
	if f := e.Forward; f != nil {
		n += len(f.AttemptID) + len(f.EndpointID) + len(f.Node) + 64
		if f.Responded != nil {
			n += respondedSize(*f.Responded)
		}
	}
	if a := e.Answer; a != nil {
		n += len(a.Reason) + 40
	}
	return n
}

// appendResponded appends e's JSON to b.
func appendResponded(b []byte, e ForwardResponded) []byte {
	b = append(b, `{"delivery_id":`...)
	b = AppendJSONString(b, e.DeliveryID)
	b = append(b, `,"attempt_id":`...)
	b = AppendJSONString(b, e.AttemptID)
	if e.AgentID != "" {
		b = append(b, `,"agent_id":`...)
		b = AppendJSONString(b, e.AgentID)
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(e.Status), 10)
	b = append(b, `,"headers":`...)
	b = appendHeaders(b, e.Headers)
	if len(e.Body) > 0 {
		b = append(b, `,"body":`...)
		b = appendJSONBytes(b, e.Body)
	}
	b = append(b, `,"body_size":`...)
	b = strconv.AppendInt(b, e.BodySize, 10)
	b = append(b, `,"captured":`...)
	b = strconv.AppendBool(b, e.Captured)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, e.DurationMs, 10)
	if e.Signature != "" {
		b = append(b, `,"signature":`...)
		b = AppendJSONString(b, e.Signature)
	}
	if f := e.Fidelity; f != nil {
		b = append(b, `,"fidelity":{"agent":`...)
		b = appendDigests(b, f.Agent)
		b = append(b, `,"relay":`...)
		b = appendDigests(b, f.Relay)
		b = append(b, '}')
	}
	if e.Copy {
		b = append(b, `,"copy":true`...)
	}
	if e.DroppedHeaders != 0 {
		b = append(b, `,"dropped_headers":`...)
		b = strconv.AppendInt(b, int64(e.DroppedHeaders), 10)
	}
	if e.NotCaptured != "" {
		b = append(b, `,"not_captured":`...)
		b = AppendJSONString(b, e.NotCaptured)
	}
	return append(b, '}')
}

// respondedSize is about the size of e's JSON, enough for one allocation.
func respondedSize(e ForwardResponded) int {
	n := 200 + base64.StdEncoding.EncodedLen(len(e.Body)) + headersSize(e.Headers) +
		len(e.DeliveryID) + len(e.AttemptID) + len(e.AgentID) + len(e.Signature) + len(e.NotCaptured)
	if f := e.Fidelity; f != nil {
		n += 120 + len(f.Agent.RequestLine) + len(f.Agent.Headers) + len(f.Agent.Body) +
			len(f.Relay.RequestLine) + len(f.Relay.Headers) + len(f.Relay.Body)
	}
	return n
}

func appendDigests(b []byte, d FidelityDigests) []byte {
	b = append(b, `{"request_line":`...)
	b = AppendJSONString(b, d.RequestLine)
	b = append(b, `,"headers":`...)
	b = AppendJSONString(b, d.Headers)
	b = append(b, `,"body":`...)
	b = AppendJSONString(b, d.Body)
	return append(b, '}')
}

// appendHeaders appends hs as a JSON array of Header (null when nil, as
// encoding/json writes a nil slice).
func appendHeaders(b []byte, hs []Header) []byte {
	if hs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHeader(b, h)
	}
	return append(b, ']')
}

// headersSize is about the size of hs's JSON when every character is
// plain.
func headersSize(hs []Header) int {
	n := 2
	for _, h := range hs {
		n += len(h.Name) + len(h.Value) + 24
	}
	return n
}

// appendHeader appends h as json.Marshal wrote it: name and value as
// strings (text that is not UTF-8 with U+FFFD, as json.Marshal does), and
// a value that is not UTF-8 again, exactly, as value_b64.
func appendHeader(b []byte, h Header) []byte {
	b = append(b, `{"name":`...)
	b = AppendJSONString(b, h.Name)
	b = append(b, `,"value":`...)
	b = AppendJSONString(b, h.Value)
	if !utf8.ValidString(h.Value) {
		b = append(b, `,"value_b64":`...)
		b = appendJSONBytes(b, []byte(h.Value))
	}
	return append(b, '}')
}

// appendJSONBytes appends p as encoding/json writes a []byte: base64 in a
// string, null when nil.
func appendJSONBytes(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}
