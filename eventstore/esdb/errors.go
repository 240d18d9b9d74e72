package esdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/relayhq/relay/domain"
)

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("event store is closed")

// translate turns a client error into one callers can branch on with
// errors.Is, keeping the original in the chain. It is the adapter's only
// error classification: by the client's error type and code, never by text.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	var esErr *esdb.Error
	if !errors.As(err, &esErr) {
		return err
	}
	if sentinel := sentinelFor(esErr.Code()); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

// sentinelFor names the port's error for a client error code, or nil when
// the port has none and the client's error stands as it is.
func sentinelFor(code esdb.ErrorCode) error {
	switch code {
	case esdb.ErrorCodeWrongExpectedVersion:
		return domain.ErrWrongExpectedRevision
	case esdb.ErrorCodeResourceNotFound:
		return domain.ErrStreamNotFound
	case esdb.ErrorCodeStreamDeleted:
		return domain.ErrStreamDeleted // matches ErrStreamNotFound too
	case esdb.ErrorCodeDeadlineExceeded:
		return context.DeadlineExceeded
	case esdb.ErrorCodeConnectionClosed:
		return ErrClosed
	default:
		return nil
	}
}
