package tunnel

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

// goroutines is every goroutine's stack, one entry each.
func goroutines() []string {
	buf := make([]byte, 4<<20)
	return strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")
}

// TestForwardKeepsAttemptGoroutines: attempts one after the other run on
// one goroutine, kept from the first (its stack grown already), not on a
// new goroutine each.
func TestForwardKeepsAttemptGoroutines(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{}, 1)
	got, _ := e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, func(cmd domain.ForwardCommand) (domain.ForwardOutcome, bool) {
		<-release
		return okAnswer(cmd)
	})
	serving := map[string]bool{}
	for range 5 {
		cmd := e.Receive(t, "ep", "acc")
		done := make(chan error, 1)
		go func() {
			_, err := e.hub.Forward(t.Context(), cmd)
			done <- err
		}()
		recv(t, got)
		for _, g := range goroutines() {
			if strings.Contains(g, "(*Hub).serve(") {
				serving[strings.Fields(g)[1]] = true // "goroutine N [state]:"
			}
		}
		release <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
			for _, g := range goroutines() {
				if strings.Contains(g, "[select") && strings.Contains(g, "workers.(*Pool[...]).work") {
					return nil
				}
			}
			return errors.New("no attempt goroutine waits for the next attempt")
		})
	}
	if len(serving) != 1 {
		t.Errorf("5 attempts one after the other ran on %d goroutines, want 1", len(serving))
	}
}
