package commands_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/secrets"
)

// TestHandshakeSecretsAreSealed: the secrets an address is given reach the
// log only as an HMAC (Meta) and sealed (Zoom); a plain secret from an
// older event is sealed by the address's next change; without a secrets
// key, a secret is refused rather than logged plain.
func TestHandshakeSecretsAreSealed(t *testing.T) {
	key, _, err := secrets.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig()
	cfg.Secrets = key
	e := newEnv(t, cfg)
	const meta, zoom = "meta-verify-token-41", "zoom-secret-token-42"
	noPlain := func(what string) {
		t.Helper()
		for _, ev := range e.allEvents(t) {
			if s := string(ev.Data); strings.Contains(s, meta) || strings.Contains(s, zoom) {
				t.Fatalf("%s: %s holds a secret: %s", what, ev.Type, s)
			}
		}
	}
	lastHandshakes := func() *domain.Handshakes {
		t.Helper()
		events := e.allEvents(t)
		ev, err := e.codec.Decode(events[len(events)-1].Type, events[len(events)-1].Data)
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case domain.InspectorAnswerSet:
			return ev.Handshakes
		case domain.EndpointReconfigured:
			return ev.Handshakes
		}
		t.Fatalf("last event %T", ev)
		return nil
	}
	acc, _ := e.account(t, "ada")
	ep := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "hooks", Mode: domain.ModeLog})
	enabled := []domain.Handshake{domain.HandshakeMeta, domain.HandshakeZoom}
	m, z := meta, zoom
	if _, err := e.svc.UpdateEndpoint(ctx(t), acc.ID, "", ep.ID, commands.EndpointPatch{
		Handshakes: &commands.HandshakesPatch{Enabled: &enabled, MetaVerifyToken: &m, ZoomSecret: &z}}); err != nil {
		t.Fatal(err)
	}
	noPlain("updateEndpoint")
	h := lastHandshakes()
	if ok, err := key.Verify(h.MetaVerifyTokenMAC, meta); !ok || err != nil {
		t.Errorf("the stored MAC does not verify the token: %v, %v (%+v)", ok, err, h)
	}
	if got, err := key.Open(h.ZoomSecretSealed); got != zoom || err != nil {
		t.Errorf("the sealed secret opens as %q, %v", got, err)
	}

	// An event written before secrets were sealed: plain values.
	in, err := e.svc.CreateInspector(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	old, err := e.codec.Encode(commands.NewEventID(), domain.InspectorAnswerSet{InspectorID: in.ID,
		Handshakes: &domain.Handshakes{Enabled: enabled, MetaVerifyToken: meta, ZoomSecret: zoom}}, time.Now(), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Append(ctx(t), domain.InspectorStream(in.ID), domain.Any(), old); err != nil {
		t.Fatal(err)
	}
	before := e.lastPosition(t)
	if _, err := e.svc.SetInspectorAnswers(ctx(t), in.ID, &domain.Answer{Status: 200}, nil); err != nil {
		t.Fatal(err)
	}
	e.appended(t, before, 1, "a change to an inspector with plain secrets")
	h = lastHandshakes()
	if h.MetaVerifyToken != "" || h.ZoomSecret != "" || h.MetaVerifyTokenMAC == "" || h.ZoomSecretSealed == "" {
		t.Errorf("the next change records %+v, want the plain secrets sealed", h)
	}

	// No key: refused, nothing recorded.
	bare := newEnv(t, defaultConfig()) // NoSweeps: the offline commands' wiring, without a key
	acc2, _ := bare.account(t, "bob")
	before = bare.lastPosition(t)
	_, err = bare.svc.CreateEndpoint(ctx(t), acc2.ID, "", domain.EndpointSettings{Name: "x", Mode: domain.ModeLog,
		Handshakes: &domain.Handshakes{Enabled: enabled, MetaVerifyToken: meta, ZoomSecret: zoom}})
	if !errors.Is(err, domain.ErrUnavailable) {
		t.Errorf("a secret without a secrets key: %v, want UNAVAILABLE", err)
	}
	bare.appended(t, before, 0, "a refused secret")
}
