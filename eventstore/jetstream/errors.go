package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/relayhq/relay/domain"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("event store is closed")

// translate turns a client error into one callers can branch on with
// errors.Is, keeping the original in the chain. It is the adapter's only
// error classification: by JetStream's API error code and the client's
// sentinel errors, never by text.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) {
		if sentinel := sentinelFor(apiErr.ErrorCode); sentinel != nil {
			return fmt.Errorf("%w: %w", sentinel, err)
		}
		return err
	}
	switch {
	case errors.Is(err, nats.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", ErrClosed, err)
	case errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// sentinelFor names the port's error for a JetStream API error code, or nil
// when the port has none and the client's error stands as it is.
//
// A failed Nats-Expected-Last-Subject-Sequence check is 10071 ("wrong last
// sequence: N") or, on replicated streams of newer servers whose leader
// refuses the message before proposing it, 10164 ("wrong last sequence",
// without the number); both are the same conflict, and an R3 stream
// returns both.
func sentinelFor(code natsjs.ErrorCode) error {
	switch code {
	case natsjs.JSErrCodeStreamWrongLastSequence, natsjs.JSErrCodeStreamWrongLastSequenceConstant:
		return domain.ErrWrongExpectedRevision
	case natsjs.JSErrCodeStreamNotFound:
		return ErrStreamMissing
	default:
		return nil
	}
}

// ErrStreamMissing reports that the JetStream stream holding the log is
// gone (deleted behind the relay's back, or the server lost its store).
var ErrStreamMissing = errors.New("the log's JetStream stream does not exist")
