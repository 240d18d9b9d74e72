package tunnel

import (
	"context"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
)

// Remote reaches the Hubs of other nodes (package nodebus carries it over
// NATS): ForwardTo runs an attempt on the Hub of node and returns its
// recorded outcome; NodeLost ends the forwards waiting on a node whose
// lease lapsed. Errors are *NodeLostError, *PublishError, *TimeoutError or
// *ReplyError. ForwardTo calls taken, when not nil, once node has
// acknowledged the command: from then on ForwardTo holds nothing of its
// request (it is sent again only until acknowledged), and the other node
// counts it.
type Remote interface {
	ForwardTo(ctx context.Context, node string, cmd domain.ForwardCommand, taken func()) (domain.ForwardOutcome, error)
	NodeLost(node string) int
}

// DefaultForwardTimeout bounds a forward whose command carries no timeout.
const DefaultForwardTimeout = 30 * time.Second

// ReplyGrace is how long past a command's own timeout the node that sent
// it to another waits for the reply: the other node answers 504 at the
// timeout, then records the outcome.
const ReplyGrace = 10 * time.Second

// TimeoutError reports a forward whose reply did not arrive in time.
type TimeoutError struct {
	AttemptID string
	Waited    time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("forward %s: no reply within %s", e.AttemptID, e.Waited.Round(time.Millisecond))
}

// Is makes errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Is(target error) bool { return target == context.DeadlineExceeded }

// ReplyError is a forward the Hub could not carry out or record.
type ReplyError struct {
	AttemptID string
	Reason    string
	// NotRecorded: the attempt ran but the other node's store did not take
	// its outcome (errors.Is(err, domain.ErrOutcomeNotRecorded)).
	NotRecorded bool
}

func (e *ReplyError) Error() string { return fmt.Sprintf("forward %s: %s", e.AttemptID, e.Reason) }

func (e *ReplyError) Unwrap() error {
	if e.NotRecorded {
		return domain.ErrOutcomeNotRecorded
	}
	return nil
}

// NodeLostError is a forward whose node's lease lapsed before it replied:
// the node is gone with the attempt, and the caller decides its outcome.
type NodeLostError struct {
	AttemptID string
	Node      string
}

func (e *NodeLostError) Error() string {
	return fmt.Sprintf("forward %s: relay node %s lost", e.AttemptID, e.Node)
}

// PublishError is a forward that could not be sent to its node: it never
// left this process.
type PublishError struct {
	AttemptID string
	Err       error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("forward %s: publish: %v", e.AttemptID, e.Err)
}
func (e *PublishError) Unwrap() error { return e.Err }
