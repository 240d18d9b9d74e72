package domain

import (
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Endpoint invariants:
//  1. An Endpoint belongs to one account and has a non-empty name.
//  2. Mode is LOG or PROXY; a PROXY Endpoint has a target.
//  3. A target is "127.0.0.1:<port>" or "localhost:<port>" with 1 <= port <= 65535:
//     the relay only ever reaches a developer's own machine.
//  4. Reconfiguring to the same settings raises no event.
//  5. A deleted Endpoint accepts no command.
//  6. Its retention window is not negative (0: the relay's default); the
//     relay's bounds are checked where they are known (retention.go).
//  7. A retention decision's cutoff only moves forward (retention.go).
//  8. Its smee stream key is stored as a hash only; revoking a key it does
//     not have raises no event.

// EndpointSettings are the user-editable fields of an Endpoint.
type EndpointSettings struct {
	Name            string
	Mode            EndpointMode
	Target          string
	ResponseCapture bool
	// Answer is what a LOG Endpoint answers (nil: 204); Handshakes are the
	// providers' verification requests it answers itself (nil: none).
	Answer     *Answer
	Handshakes *Handshakes
	// Filters choose the deliveries forwarded at all (all must match); a
	// delivery they refuse is recorded and answered as a LOG Endpoint
	// answers. Nil: every delivery. Never an empty non-nil slice.
	Filters []Filter
	// Retention is how long the Endpoint keeps deliveries; 0: the relay's
	// default window.
	Retention time.Duration
	// Queue is a QUEUE Endpoint's forwarding and retry policy (nil: the
	// defaults, domain.DefaultQueuePolicy).
	Queue *QueuePolicy
}

// Validate checks the settings' invariants.
func (s EndpointSettings) Validate() error {
	if strings.TrimSpace(s.Name) == "" {
		return &InvalidInputError{Field: "name", Reason: "must not be empty"}
	}
	if len(s.Name) > 200 {
		return &InvalidInputError{Field: "name", Reason: "at most 200 characters"}
	}
	if s.Mode != ModeLog && s.Mode != ModeProxy && s.Mode != ModeQueue {
		return &InvalidInputError{Field: "mode", Reason: "must be LOG, PROXY or QUEUE"}
	}
	if err := s.Queue.Validate(); err != nil {
		return err
	}
	if s.Retention < 0 {
		return &InvalidInputError{Field: "retention", Reason: "must be positive"}
	}
	if _, _, err := validateAnswers(s.Answer, s.Handshakes); err != nil {
		return err
	}
	if err := ValidateFilters(s.Filters); err != nil {
		return err
	}
	if s.Target == "" {
		if s.Mode == ModeProxy {
			return &InvalidInputError{Field: "target", Reason: "PROXY mode needs a target such as 127.0.0.1:3000"}
		}
		return nil
	}
	return ValidateTarget(s.Target)
}

// normalized returns valid settings as they are stored (invariant 6 of
// answer.go).
func (s EndpointSettings) normalized() (EndpointSettings, error) {
	if err := s.Validate(); err != nil {
		return s, err
	}
	s.Answer, s.Handshakes, _ = validateAnswers(s.Answer, s.Handshakes)
	return s, nil
}

// equal compares every field, the answer groups by value; reflect keeps
// fields added later compared too.
func (s EndpointSettings) equal(o EndpointSettings) bool { return reflect.DeepEqual(s, o) }

// ValidateTarget accepts only 127.0.0.1:<port> and localhost:<port>.
func ValidateTarget(target string) error {
	host, port, err := net.SplitHostPort(target)
	if err != nil || (host != "127.0.0.1" && host != "localhost") {
		return &InvalidInputError{Field: "target", Reason: "must be 127.0.0.1:<port> or localhost:<port>"}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return &InvalidInputError{Field: "target", Reason: "port must be a number from 1 to 65535"}
	}
	return nil
}

// Endpoint is an account's public address in LOG or PROXY mode.
type Endpoint struct {
	aggregate
	id        string
	accountID string
	settings  EndpointSettings
	deleted   bool
	// retainedTo is the cutoff of the latest retention decision.
	retainedTo time.Time
	smeeKey    string // SHA-256 of the smee stream key, hex; "" for none
}

// NewEndpoint creates an Endpoint for an account; by is the member who
// made it ("" for a token without a member), for the account's activity.
func NewEndpoint(id, accountID, by string, s EndpointSettings) (*Endpoint, error) {
	if err := ValidateAddressID(id); err != nil {
		return nil, err
	}
	if accountID == "" {
		return nil, ErrUnauthenticated
	}
	s, err := s.normalized()
	if err != nil {
		return nil, err
	}
	e := &Endpoint{aggregate: newAggregate()}
	e.raise(EndpointCreated{EndpointID: id, AccountID: accountID, Name: s.Name, Mode: s.Mode, Target: s.Target, ResponseCapture: s.ResponseCapture,
		Answer: s.Answer, Handshakes: s.Handshakes, Filters: nilIfNone(s.Filters), RetentionMs: s.Retention.Milliseconds(), Queue: s.Queue, By: by})
	return e, nil
}

// LoadEndpoint rebuilds an Endpoint from its stream.
func LoadEndpoint(events []Event) *Endpoint {
	e := &Endpoint{aggregate: newAggregate()}
	for _, ev := range events {
		e.apply(ev)
		e.loaded()
	}
	return e
}

func (e *Endpoint) raise(ev Event) { e.apply(ev); e.changes = append(e.changes, ev) }

func (e *Endpoint) apply(ev Event) {
	switch ev := ev.(type) {
	case EndpointCreated:
		e.id, e.accountID = ev.EndpointID, ev.AccountID
		e.settings = EndpointSettings{Name: ev.Name, Mode: ev.Mode, Target: ev.Target, ResponseCapture: ev.ResponseCapture,
			Answer: ev.Answer, Handshakes: ev.Handshakes, Filters: nilIfNone(ev.Filters), Retention: msDuration(ev.RetentionMs), Queue: ev.Queue}
	case EndpointReconfigured:
		e.settings = EndpointSettings{Name: ev.Name, Mode: ev.Mode, Target: ev.Target, ResponseCapture: ev.ResponseCapture,
			Answer: ev.Answer, Handshakes: ev.Handshakes, Filters: nilIfNone(ev.Filters), Retention: msDuration(ev.RetentionMs), Queue: ev.Queue}
	case EndpointDeleted:
		e.deleted = true
	case EndpointRetained:
		if cutoff, err := time.Parse(time.RFC3339Nano, ev.Cutoff); err == nil {
			e.retainedTo = cutoff
		}
	case EndpointSmeeKeySet:
		e.smeeKey = ev.KeyHash
	}
}

// ID and Settings describe the Endpoint.
func (e *Endpoint) ID() string                 { return e.id }
func (e *Endpoint) Settings() EndpointSettings { return e.settings }

// OwnedBy reports whether accountID may see and change the Endpoint; a
// deleted or foreign Endpoint is reported as not found by callers.
func (e *Endpoint) OwnedBy(accountID string) bool {
	return e.id != "" && !e.deleted && e.accountID == accountID
}

// Reconfigure applies new settings, by a member ("" for none); the same
// settings raise no event.
func (e *Endpoint) Reconfigure(by string, s EndpointSettings) error {
	if e.deleted {
		return ErrNotFound
	}
	s, err := s.normalized()
	if err != nil {
		return err
	}
	s.Filters = nilIfNone(s.Filters)
	if s.equal(e.settings) {
		return nil
	}
	e.raise(EndpointReconfigured{EndpointID: e.id, Name: s.Name, Mode: s.Mode, Target: s.Target, ResponseCapture: s.ResponseCapture,
		Answer: s.Answer, Handshakes: s.Handshakes, Filters: s.Filters, RetentionMs: s.Retention.Milliseconds(), Queue: s.Queue, By: by})
	return nil
}

// msDuration reads a duration stored in milliseconds.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// Retain decides to remove the deliveries received before now minus
// window: deliveries is how many delivery streams the removal deletes (at
// least that many when atLeast: the caller's count stopped at its bound)
// and lastActivity the newest delivery's time (what the views keep of it). It
// reports whether it decided; a cutoff not after the latest decision's, no
// deliveries, or a deleted Endpoint raise no event.
func (e *Endpoint) Retain(window time.Duration, now, lastActivity time.Time, deliveries int64, atLeast bool) (bool, error) {
	if window <= 0 {
		return false, &InvalidInputError{Field: "retention", Reason: "must be positive"}
	}
	cutoff := now.Add(-window).UTC()
	if e.id == "" || deliveries <= 0 || !cutoff.After(e.retainedTo) {
		return false, nil
	}
	e.raise(EndpointRetained{EndpointID: e.id, RetentionMs: window.Milliseconds(), Cutoff: cutoff.Format(time.RFC3339Nano),
		LastActivityAt: lastActivity.UTC().Format(time.RFC3339Nano), Deliveries: deliveries, DeliveriesAtLeast: atLeast})
	return true, nil
}

// nilIfNone keeps "no filter" one value, so settings compare equal.
func nilIfNone(fs []Filter) []Filter {
	if len(fs) == 0 {
		return nil
	}
	return fs
}

// SetSmeeKey gives the Endpoint the smee stream key whose SHA-256 (hex) is
// keyHash, or revokes its key with "", by a member ("" for none).
func (e *Endpoint) SetSmeeKey(by, keyHash string) error {
	if e.deleted {
		return ErrNotFound
	}
	if keyHash == e.smeeKey {
		return nil
	}
	e.raise(EndpointSmeeKeySet{EndpointID: e.id, KeyHash: keyHash, By: by})
	return nil
}

// Delete closes the Endpoint, by a member ("" for none).
func (e *Endpoint) Delete(by string) error {
	if e.deleted {
		return ErrNotFound
	}
	e.raise(EndpointDeleted{EndpointID: e.id, By: by})
	return nil
}
