package nodebus

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/natstest"
	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/tunnel"
)

func TestClientCreatedAfterRun(t *testing.T) {
	e := newEnv(t)
	e.agent(t, tunnel.SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	late := NewClient(e.bus) // its reply handler starts on the running router
	out, err := late.Forward(t.Context(), e.Receive(t, "ep", "acc"))
	if err != nil || out.Status != 200 {
		t.Fatalf("forward through a late client: %+v, %v", out, err)
	}
	// Each client gets its replies on a topic of its own.
	out, err = e.client.Forward(t.Context(), e.Receive(t, "ep", "acc"))
	if err != nil || out.Status != 200 {
		t.Fatalf("forward through the first client: %+v, %v", out, err)
	}
}

func TestCloseWithoutRun(t *testing.T) {
	bus, err := NewBus(nil)
	if err != nil {
		t.Fatal(err)
	}
	Serve(bus, tunnel.NewHub(tunnel.HubConfig{}))
	NewClient(bus)
	if err := bus.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// Each bus hands a subscriber its topic's messages in the order they were
// published, each once the one before was handled, as NATS core does for
// one connection's messages. The exchange relies on it: a Client takes the
// first reply to a command, and a command sent again after it was answered
// is answered after that answer (a copy's, when its node kept none, with
// 503 "copy's answer lost between relay nodes"). The bus in one process,
// on Watermill's GoChannel, handed each message on from a goroutine of its
// own: of 1 000 messages published one after another, some were handled
// after a later one, and a copy whose listener answered could be recorded
// lost (TestCopiesAnswersFromAnotherNodeAreCounted: 31 copies of 32).
func TestBusKeepsEachTopicsOrder(t *testing.T) {
	tests := []struct {
		name string
		bus  func(t *testing.T) *Bus
	}{
		{"in one process", func(t *testing.T) *Bus {
			bus, err := NewBus(nil)
			if err != nil {
				t.Fatal(err)
			}
			return bus
		}},
		{"NATS", func(t *testing.T) *Bus {
			bus, err := NewNATSBus(nil, []string{natstest.Start(t).URL()}, "order", PendingBytes(ingress.DefaultProxyBodyBudget))
			if err != nil {
				t.Fatal(err)
			}
			return bus
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bus := tt.bus(t)
			const messages = 1000
			var (
				mu                sync.Mutex
				handled           []int
				running, together int // handlers running now, and at most
			)
			bus.addHandler("order", "order.test", "", func(m *message.Message) ([]*message.Message, error) {
				mu.Lock()
				running++
				together = max(together, running)
				mu.Unlock()
				i, err := strconv.Atoi(string(m.Payload))
				runtime.Gosched() // room for another handler to start meanwhile
				mu.Lock()
				defer mu.Unlock()
				running--
				if err != nil {
					return nil, err
				}
				handled = append(handled, i)
				return nil, nil
			})
			runBus(t, bus)
			for i := range messages {
				if err := bus.pubsub.Publish("order.test", message.NewMessage(watermill.NewUUID(), []byte(strconv.Itoa(i)))); err != nil {
					t.Fatal(err)
				}
			}
			testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
				mu.Lock()
				defer mu.Unlock()
				if len(handled) < messages {
					return fmt.Errorf("%d messages handled of %d", len(handled), messages)
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			late, newest := 0, -1
			for _, i := range handled {
				if i < newest {
					late++
				} else {
					newest = i
				}
			}
			t.Logf("%d messages: %d handled after a later one, at most %d handled at once", len(handled), late, together)
			if late > 0 || len(handled) != messages {
				t.Errorf("%d of %d messages handled after a later one (%d handled), want every one in the order published", late, messages, len(handled))
			}
			if together > 1 {
				t.Errorf("%d messages handled at once, want one at a time", together)
			}
		})
	}
}
