package ingress

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestOwnAnswer: an inspector and a LOG Endpoint answer their configured
// answer byte for byte, and a handshake they enable before it; each is
// recorded with the answer and its reason.
func TestOwnAnswer(t *testing.T) {
	e := newEnv(t, Config{})
	configured := &domain.Answer{Status: 202, Headers: []domain.Header{{Name: "X-Relay", Value: "yes"}, {Name: "X-Relay", Value: "twice"}}, Body: []byte("accepted\n")}
	hs := &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeDropbox, domain.HandshakeMeta}, MetaVerifyToken: "tok"}
	e.addInspector("insp1", time.Hour)
	e.routes.set(Route{ID: "insp1", Kind: domain.AddressInspector, Answer: configured, Handshakes: hs})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeLog, Answer: configured, Handshakes: hs})
	for _, host := range []string{"insp1.localhost", "ep1.localhost"} {
		t.Run(host, func(t *testing.T) {
			resp, body := e.do("POST", host, "/hook", nil, []byte("x"))
			if resp.StatusCode != 202 || string(body) != "accepted\n" || !reflect.DeepEqual(resp.Header.Values("X-Relay"), []string{"yes", "twice"}) {
				t.Errorf("answered %d %q %v", resp.StatusCode, body, resp.Header)
			}
			if ct := resp.Header.Values("Content-Type"); len(ct) != 0 {
				t.Errorf("a Content-Type the answer does not set was added: %q", ct)
			}
			got, _ := e.lastDelivery()
			if !reflect.DeepEqual(got.Answer, &domain.ReceiptAnswer{Status: 202, Reason: domain.ReasonConfiguredAnswer}) {
				t.Errorf("recorded answer %+v", got.Answer)
			}

			resp, body = e.do("GET", host, "/dbx?challenge=abc-d", nil, nil)
			if resp.StatusCode != 200 || string(body) != "abc-d" || resp.Header.Get("X-Content-Type-Options") != "nosniff" ||
				resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("dropbox answered %d %q %v", resp.StatusCode, body, resp.Header)
			}
			got, _ = e.lastDelivery()
			if !reflect.DeepEqual(got.Answer, &domain.ReceiptAnswer{Status: 200, Reason: "handshake: Dropbox verification"}) {
				t.Errorf("recorded answer %+v", got.Answer)
			}

			resp, body = e.do("GET", host, "/?hub.mode=subscribe&hub.challenge=99&hub.verify_token=nope", nil, nil)
			if resp.StatusCode != 403 || bytes.Contains(body, []byte("99")) {
				t.Errorf("meta with a wrong token answered %d %q", resp.StatusCode, body)
			}
		})
	}
}

// TestProxyHandshakes: a PROXY Endpoint forwards handshakes unless it says
// the relay answers them; then nothing is forwarded.
func TestProxyHandshakes(t *testing.T) {
	e := newEnv(t, Config{ForwardTimeout: 5 * time.Second})
	local := localServer(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) })
	e.fwd.set(func(f *httpForwarder) { f.target = local })
	slack := []byte(`{"type":"url_verification","challenge":"c-1"}`)
	hs := &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeSlack}}
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy, Handshakes: hs})
	if resp, _ := e.do("POST", "ep1.localhost", "/", nil, slack); resp.StatusCode != 299 || len(e.fwd.commands()) != 1 {
		t.Fatalf("LOCAL: answered %d after %d forwards, want the local 299", resp.StatusCode, len(e.fwd.commands()))
	}
	relay := *hs
	relay.InProxy = domain.HandshakesRelay
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeProxy, Handshakes: &relay})
	resp, body := e.do("POST", "ep1.localhost", "/", nil, slack)
	if resp.StatusCode != 200 || string(body) != "c-1" || len(e.fwd.commands()) != 1 {
		t.Fatalf("RELAY: answered %d %q after %d forwards", resp.StatusCode, body, len(e.fwd.commands()))
	}
	got, events := e.lastDelivery()
	if len(events) != 1 || !reflect.DeepEqual(got.Answer, &domain.ReceiptAnswer{Status: 200, Reason: "handshake: Slack URL verification"}) {
		t.Errorf("recorded %+v (%d events)", got.Answer, len(events))
	}
	if resp, _ := e.do("POST", "ep1.localhost", "/", nil, []byte(`{"type":"event_callback"}`)); resp.StatusCode != 299 {
		t.Errorf("a plain request answered %d, want it forwarded", resp.StatusCode)
	}
}

// TestOwnAnswerSendsNoCookie: an answer stored with Set-Cookie before such
// answers were refused (so not validated again) is sent without it.
func TestOwnAnswerSendsNoCookie(t *testing.T) {
	e := newEnv(t, Config{})
	stored := &domain.Answer{Status: 200, Headers: []domain.Header{{Name: "Set-Cookie", Value: "relay_session=x; Domain=localhost"},
		{Name: "set-cookie2", Value: "a=b"}, {Name: "X-Kept", Value: "1"}}, Body: []byte("ok")}
	e.addInspector("insp1", time.Hour)
	e.routes.set(Route{ID: "insp1", Kind: domain.AddressInspector, Answer: stored})
	resp, body := e.do("POST", "insp1.localhost", "/", nil, []byte("x"))
	if resp.StatusCode != 200 || string(body) != "ok" || resp.Header.Get("X-Kept") != "1" {
		t.Fatalf("answered %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if c := resp.Header.Values("Set-Cookie"); len(c) != 0 || resp.Header.Get("Set-Cookie2") != "" {
		t.Fatalf("sent a cookie: %v", resp.Header)
	}
}
