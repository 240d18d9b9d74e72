// Package record is the only writer of the event log: it turns the
// aggregates' decisions into appends. Every event is encoded here with one
// codec, one ID source and one clock; the expected revision, the retry on
// a conflicting writer and the queued append of the proxy fast path
// (domain.AppendQueuer) are decided here and nowhere else.
//
// The use cases on the Recorder are those of the hot paths and of the
// components that own no aggregate: a delivery received (answered at once,
// or recorded before it is forwarded), an attempt's outcome, an agent's
// session, an inspector's expiry, rate-limit refusals. The packages that
// call it (ingress, tunnel, commands) each declare the small interface
// they need, so dependencies point from them to here and from here to
// domain only. The check in check_test.go keeps it the only writer.
package record
