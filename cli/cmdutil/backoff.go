package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/relayhq/relay/apiclient"
)

// Transient reports whether err is network trouble or a failure the relay
// may not repeat (unavailable, rate limited): what the long-running
// commands retry. Refusals, usage errors, a --server that is no relay and
// an https:// --server of a plain-HTTP relay are not.
func Transient(err error) bool {
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return !ae.Refusal()
	}
	var pe *apiclient.PlainHTTPError
	if errors.As(err, &pe) {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

// NewBackoff is the long-running commands' backoff: 0.5 s doubling to
// 10 s, with jitter, as the agent's.
func NewBackoff() *backoff.ExponentialBackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval, bo.MaxInterval = 500*time.Millisecond, 10*time.Second
	return bo
}

// UntilReachable runs op until it succeeds, fails for good, or ctx ends,
// retrying transient failures with backoff and saying so on w.
func UntilReachable(ctx context.Context, w io.Writer, op func() error) error {
	bo := NewBackoff()
	for {
		err := op()
		if err == nil || !Transient(err) {
			return err
		}
		delay := bo.NextBackOff()
		fmt.Fprintf(w, "%v; retrying in %s\n", err, delay.Round(100*time.Millisecond))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}
