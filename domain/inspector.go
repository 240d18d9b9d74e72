package domain

import (
	"fmt"
	"reflect"
	"time"
)

// Inspector invariants:
//  1. An inspector has a non-empty, DNS-label-safe ID and a positive idle TTL.
//  2. It expires when no request reached it for its idle TTL; expiry is final.
//  3. Expiring an already expired inspector raises no event.
//  4. Its deliveries are purged only once it has been expired for at least
//     the retention, and only once; a purge records the expiry first if no
//     request did.
//  5. Its own answer and handshakes (answer.go) change only while it is
//     not expired; the same ones raise no event.

// Inspector is a guest inspector: a public address that records and
// answers 204, or its configured answer.
type Inspector struct {
	aggregate
	id         string
	ttl        time.Duration
	expired    bool
	purged     bool
	answer     *Answer
	handshakes *Handshakes
	network    string
}

// InspectorOptions are what an inspector is opened with besides its TTL.
type InspectorOptions struct {
	Smee bool // smee-compatible address (InspectorCreated.Smee)
	// Network is the client network that asked for it
	// (InspectorCreated.Network); "" for none known.
	Network string
}

// NewInspector opens an inspector.
func NewInspector(id string, ttl time.Duration) (*Inspector, error) {
	return NewInspectorWith(id, ttl, InspectorOptions{})
}

// NewInspectorWith opens an inspector with options.
func NewInspectorWith(id string, ttl time.Duration, o InspectorOptions) (*Inspector, error) {
	if err := ValidateAddressID(id); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, &InvalidInputError{Field: "ttl", Reason: "must be positive"}
	}
	i := &Inspector{aggregate: newAggregate()}
	i.raise(InspectorCreated{InspectorID: id, IdleTTLMs: ttl.Milliseconds(), Smee: o.Smee, Network: o.Network})
	return i, nil
}

// LoadInspector rebuilds an inspector from its stream.
func LoadInspector(events []Event) *Inspector {
	i := &Inspector{aggregate: newAggregate()}
	for _, e := range events {
		i.apply(e)
		i.loaded()
	}
	return i
}

func (i *Inspector) raise(e Event) { i.apply(e); i.changes = append(i.changes, e) }

func (i *Inspector) apply(e Event) {
	switch e := e.(type) {
	case InspectorCreated:
		i.id = e.InspectorID
		i.ttl = time.Duration(e.IdleTTLMs) * time.Millisecond
		i.network = e.Network
	case InspectorExpired:
		i.expired = true
	case InspectorAnswerSet:
		i.answer, i.handshakes = e.Answer, e.Handshakes
	case InspectorPurged:
		i.expired, i.purged = true, true
	}
}

// ID is the inspector's address.
func (i *Inspector) ID() string { return i.id }

// Network is the client network that created it ("" when unknown).
func (i *Inspector) Network() string { return i.network }

// Answers are the inspector's own answer and handshakes (nil: defaults).
func (i *Inspector) Answers() (*Answer, *Handshakes) { return i.answer, i.handshakes }

// SetAnswers replaces the inspector's own answer and handshakes.
func (i *Inspector) SetAnswers(a *Answer, h *Handshakes) error {
	if i.id == "" || i.expired {
		return ErrNotFound
	}
	a, h, err := validateAnswers(a, h)
	if err != nil {
		return err
	}
	if reflect.DeepEqual(a, i.answer) && reflect.DeepEqual(h, i.handshakes) {
		return nil
	}
	i.raise(InspectorAnswerSet{InspectorID: i.id, Answer: a, Handshakes: h})
	return nil
}

// ExpiresAt is when the inspector expires if nothing reaches it after lastActivity.
func (i *Inspector) ExpiresAt(lastActivity time.Time) time.Time { return lastActivity.Add(i.ttl) }

// ExpireIfIdle records expiry when now is past the idle TTL; it reports
// whether the inspector is expired.
func (i *Inspector) ExpireIfIdle(lastActivity, now time.Time) bool {
	if i.expired {
		return true
	}
	if now.Before(i.ExpiresAt(lastActivity)) {
		return false
	}
	i.raise(InspectorExpired{InspectorID: i.id, LastActivityAt: lastActivity.UTC().Format(time.RFC3339Nano)})
	return true
}

// Purged tells whether the inspector's deliveries were purged.
func (i *Inspector) Purged() bool { return i.purged }

// PurgeIfRetained decides to remove the deliveries of an inspector idle
// since lastActivity once it has been expired for retention at now;
// deliveries is how many delivery streams the removal deletes. It reports
// whether the inspector is purged (now or before).
func (i *Inspector) PurgeIfRetained(lastActivity, now time.Time, retention time.Duration, deliveries int64) (bool, error) {
	if retention <= 0 {
		return false, &InvalidInputError{Field: "retention", Reason: "must be positive"}
	}
	if i.purged {
		return true, nil
	}
	if now.Before(i.ExpiresAt(lastActivity).Add(retention)) {
		return false, nil
	}
	i.ExpireIfIdle(lastActivity, now)
	i.raise(InspectorPurged{InspectorID: i.id, LastActivityAt: lastActivity.UTC().Format(time.RFC3339Nano),
		RetentionMs: retention.Milliseconds(), Deliveries: deliveries})
	return true, nil
}

// ValidateAddressID checks that id can be the first label of a hostname.
func ValidateAddressID(id string) error {
	if id == "" || len(id) > 63 {
		return &InvalidInputError{Field: "id", Reason: "must be 1 to 63 characters"}
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return &InvalidInputError{Field: "id", Reason: fmt.Sprintf("%q is not allowed in a hostname label", r)}
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' {
		return &InvalidInputError{Field: "id", Reason: "must not start or end with '-'"}
	}
	return nil
}
