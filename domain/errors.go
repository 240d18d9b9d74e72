package domain

import (
	"errors"
	"fmt"
)

// Sentinels callers branch on with errors.Is.
var (
	ErrNotFound           = errors.New("not found")
	ErrStreamNotFound     = errors.New("stream not found")
	ErrSubscriptionClosed = errors.New("subscription closed")
	ErrInvalidInput       = errors.New("invalid input")
	ErrUnauthenticated    = errors.New("unauthenticated")
	// ErrForbidden: the caller is signed in but its role may not do this
	// (a member managing members or reading the account's activity).
	ErrForbidden             = errors.New("only an owner of the account may do this")
	ErrRetryNotProxy         = errors.New("retry needs an endpoint in PROXY mode")
	ErrAgentNotConnected     = errors.New("no agent connected")
	ErrPayloadIncomplete     = errors.New("stored payload is incomplete")
	ErrDuplicateEventID      = errors.New("event ID already used elsewhere")
	ErrUnknownEventType      = errors.New("unknown event type")
	ErrWrongExpectedRevision = errors.New("wrong expected revision")
	// ErrUnavailable: the relay cannot serve the request now (its views are
	// behind the log); the caller may try again later.
	ErrUnavailable = errors.New("temporarily unavailable")
	// ErrOutcomeNotRecorded: an attempt ran (the local target may have
	// answered) but the store did not take its outcome; the sender must
	// not be told that answer, nor that none came.
	ErrOutcomeNotRecorded = errors.New("the attempt's outcome could not be recorded")
	// ErrStreamDeleted is a read of, or an append to, a deleted stream
	// (EventStoreDB's StreamDeleted). It matches ErrStreamNotFound too: a
	// deleted stream has no events to read.
	ErrStreamDeleted = fmt.Errorf("stream deleted: %w", ErrStreamNotFound)
)

// WrongExpectedRevisionError is a failed optimistic-concurrency check.
type WrongExpectedRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	Actual   uint64 // last revision of the stream
	Exists   bool   // false when the stream was empty
}

func (e *WrongExpectedRevisionError) Error() string {
	actual := "no stream"
	if e.Exists {
		actual = fmt.Sprintf("revision %d", e.Actual)
	}
	return fmt.Sprintf("append to %s: expected %s, stream is at %s", e.Stream, e.Expected, actual)
}

// Is makes errors.Is(err, ErrWrongExpectedRevision) true.
func (e *WrongExpectedRevisionError) Is(target error) bool { return target == ErrWrongExpectedRevision }

// InvalidInputError names the field that was refused.
type InvalidInputError struct {
	Field  string
	Reason string
}

func (e *InvalidInputError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InvalidInputError) Is(target error) bool { return target == ErrInvalidInput }
