package nodebus

import (
	"github.com/relayhq/relay/tunnel"
	"testing"
)

func TestClientCreatedAfterRun(t *testing.T) {
	e := newEnv(t)
	e.agent(t, tunnel.SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	late := NewClient(e.bus) // its reply handler starts on the running router
	out, err := late.Forward(t.Context(), e.receive(t, "ep", "acc"))
	if err != nil || out.Status != 200 {
		t.Fatalf("forward through a late client: %+v, %v", out, err)
	}
	// Each client gets its replies on a topic of its own.
	out, err = e.client.Forward(t.Context(), e.receive(t, "ep", "acc"))
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
