package jetstream

import (
	"errors"
	"fmt"
	"testing"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// A stream electing a leader answers 10008; it is waited out like a server
// that does not answer, and no other API error is.
func TestTemporarilyUnavailableIsRetried(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&natsjs.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{fmt.Errorf("read the stream's head: %w", &natsjs.APIError{Code: 503, ErrorCode: 10008}), true},
		{&natsjs.APIError{Code: 400, ErrorCode: natsjs.JSErrCodeStreamWrongLastSequence}, false},
		{errors.New("JetStream system temporarily unavailable"), false}, // classified by code, never by text
	} {
		if got := temporarilyUnavailable(tc.err); got != tc.want {
			t.Errorf("temporarilyUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
