package projections

import (
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestAddressAnswers: an Endpoint's and an inspector's own answer and
// handshakes reach Address (what ingress routes by), Endpoint and
// Inspector, follow each change, and are read again after a rebuild.
func TestAddressAnswers(t *testing.T) {
	e := newEnv(t, Options{})
	answer := &domain.Answer{Status: 202, Headers: []domain.Header{{Name: "X-A", Value: "1"}}, Body: []byte("ok")}
	hs := &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeZoom}, ZoomSecret: "zs", InProxy: domain.HandshakesRelay}
	e.must(e.signUp(e.ctx, "acct-1", "Ada", "tok-1", "secret-1", t0))
	e.must(e.newEndpoint(e.ctx, "ep-1", "acct-1", domain.EndpointSettings{Name: "a", Mode: domain.ModeLog, Answer: answer}, t0))
	e.do(e.newInspector(e.ctx, "insp-1", time.Hour, t0))
	check := func(when string, id string, want readmodel.Answers) {
		t.Helper()
		a, err := e.views.Address(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Answers, want) {
			t.Errorf("%s: address %s answers %+v, want %+v", when, id, a.Answers, want)
		}
		var got readmodel.Answers
		if a.Kind == domain.AddressEndpoint {
			ep, err := e.views.Endpoint(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got = ep.Answers
		} else {
			in, err := e.views.Inspector(e.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got = in.Answers
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s answers %+v, want %+v", when, id, got, want)
		}
	}
	check("created", "ep-1", readmodel.Answers{Answer: answer})
	check("created", "insp-1", readmodel.Answers{})

	e.do(e.onEndpoint(e.ctx, "ep-1", t0.Add(time.Second), func(ep *domain.Endpoint) error {
		s := ep.Settings()
		s.Handshakes = hs
		return ep.Reconfigure("", s)
	}))
	evs, err := e.load(e.ctx, domain.InspectorStream("insp-1"))
	if err != nil {
		t.Fatal(err)
	}
	in := domain.LoadInspector(evs)
	if err := in.SetAnswers(answer, hs); err != nil {
		t.Fatal(err)
	}
	e.do(e.save(e.ctx, domain.InspectorStream("insp-1"), in.Expected(), t0.Add(time.Second), in.Changes()...))
	check("changed", "ep-1", readmodel.Answers{Answer: answer, Handshakes: hs})
	check("changed", "insp-1", readmodel.Answers{Answer: answer, Handshakes: hs})

	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.sync(e.views)
	check("rebuilt", "ep-1", readmodel.Answers{Answer: answer, Handshakes: hs})
	check("rebuilt", "insp-1", readmodel.Answers{Answer: answer, Handshakes: hs})
}
