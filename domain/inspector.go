package domain

import (
	"fmt"
	"time"
)

// Inspector invariants:
//  1. An inspector has a non-empty, DNS-label-safe ID and a positive idle TTL.
//  2. It expires when no request reached it for its idle TTL; expiry is final.
//  3. Expiring an already expired inspector raises no event.

// Inspector is a guest inspector: a public address that records and answers 204.
type Inspector struct {
	aggregate
	id      string
	ttl     time.Duration
	expired bool
}

// NewInspector opens an inspector.
func NewInspector(id string, ttl time.Duration) (*Inspector, error) {
	if err := ValidateAddressID(id); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, &InvalidInputError{Field: "ttl", Reason: "must be positive"}
	}
	i := &Inspector{aggregate: newAggregate()}
	i.raise(InspectorCreated{InspectorID: id, IdleTTLMs: ttl.Milliseconds()})
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
	case InspectorExpired:
		i.expired = true
	}
}

// ID is the inspector's address.
func (i *Inspector) ID() string { return i.id }

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
