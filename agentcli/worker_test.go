package agentcli

import (
	"errors"
	"testing"
)

// TestWorkerChannelDropsLateAnswers: a worker's answer channel serves all
// its forwards, so an answer that arrives after complete gave up on it
// (timeout, cancel) must not reach the next forward's wait; and once the
// wait is over no answer is sent to it at all.
func TestWorkerChannelDropsLateAnswers(t *testing.T) {
	s := &session{dones: map[string]chan error{}}
	done := make(chan error, 1)
	for _, tc := range []struct {
		name     string
		answered bool // the answer came before the waiter gave up
	}{{"answered then forgotten", true}, {"forgotten unanswered", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s.opsMu.Lock()
			s.dones["att-1"] = done
			s.opsMu.Unlock()
			if tc.answered {
				s.finishIn(s.dones, "att-1", errors.New("late"))
			}
			s.forget(s.dones, "att-1", done)
			// After forget, an answer for the same attempt finds no wait.
			s.finishIn(s.dones, "att-1", errors.New("later"))
			select {
			case err := <-done:
				t.Fatalf("the channel still holds %v for the next forward", err)
			default:
			}
			if len(s.dones) != 0 {
				t.Errorf("waits left: %v", s.dones)
			}
		})
	}
}
