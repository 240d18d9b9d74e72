package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestAnswerValidate(t *testing.T) {
	many := make([]domain.Header, domain.MaxAnswerHeaders+1)
	for i := range many {
		many[i] = domain.Header{Name: "X-A", Value: "1"}
	}
	for _, tc := range []struct {
		name  string
		a     domain.Answer
		field string // "" when valid
	}{
		{"default", domain.DefaultAnswer, ""},
		{"json", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{}`)}, ""},
		{"body at the limit", domain.Answer{Status: 200, Body: make([]byte, domain.MaxAnswerBody)}, ""},
		{"body over the limit", domain.Answer{Status: 200, Body: make([]byte, domain.MaxAnswerBody+1)}, "answer.body"},
		{"status 199", domain.Answer{Status: 199}, "answer.status"},
		{"status 600", domain.Answer{Status: 600}, "answer.status"},
		{"body with 204", domain.Answer{Status: 204, Body: []byte("x")}, "answer.body"},
		{"too many headers", domain.Answer{Status: 200, Headers: many}, "answer.headers"},
		{"headers too large", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X-Big", Value: strings.Repeat("a", domain.MaxAnswerHeaderBytes)}}}, "answer.headers"},
		{"bad name", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X Bad", Value: "1"}}}, "answer.headers[0].name"},
		{"empty name", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "", Value: "1"}}}, "answer.headers[0].name"},
		{"CRLF in value", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X-A", Value: "1\r\nSet-Cookie: a=b"}}}, "answer.headers[0].value"},
		{"set-cookie", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X-A", Value: "1"}, {Name: "set-cookie", Value: "relay_session=x; Domain=localhost"}}}, "answer.headers[1].name"},
		{"Set-Cookie2", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "Set-Cookie2", Value: "a=b"}}}, "answer.headers[0].name"},
		{"framing header", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "content-length", Value: "3"}}}, "answer.headers[0].name"},
		{"hop-by-hop header", domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X-A", Value: "1"}, {Name: "Transfer-Encoding", Value: "chunked"}}}, "answer.headers[1].name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate()
			var in *domain.InvalidInputError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && !errors.As(err, &in):
				t.Fatalf("got %v, want an invalid %s", err, tc.field)
			case tc.field != "" && in.Field != tc.field:
				t.Fatalf("refused field %q (%v), want %q", in.Field, err, tc.field)
			}
		})
	}
}

func TestHandshakesValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		h     domain.Handshakes
		field string
	}{
		{"none", domain.Handshakes{}, ""},
		{"slack and dropbox", domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeSlack, domain.HandshakeDropbox}}, ""},
		{"unknown", domain.Handshakes{Enabled: []domain.Handshake{"github"}}, "handshakes.enabled[0]"},
		{"twice", domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeSlack, domain.HandshakeSlack}}, "handshakes.enabled[1]"},
		{"meta without token", domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeMeta}}, "handshakes.metaVerifyToken"},
		{"zoom without secret", domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeZoom}}, "handshakes.zoomSecret"},
		{"zoom with secret", domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeZoom}, ZoomSecret: "s"}, ""},
		{"secret too long", domain.Handshakes{ZoomSecret: strings.Repeat("s", domain.MaxHandshakeSecret+1)}, "handshakes.zoomSecret"},
		{"bad side", domain.Handshakes{InProxy: "BOTH"}, "handshakes.inProxy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.h.Validate()
			var in *domain.InvalidInputError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.As(err, &in) || in.Field != tc.field):
				t.Fatalf("got %v, want an invalid %s", err, tc.field)
			}
		})
	}
}

// TestEndpointAnswerEvents: a change of answer or handshakes raises one
// EndpointReconfigured carrying them; the same ones again raise none, and
// a default answer is stored as none.
func TestEndpointAnswerEvents(t *testing.T) {
	set := domain.EndpointSettings{Name: "hooks", Mode: domain.ModeLog}
	ep, err := domain.NewEndpoint("ep1", "acc", "", set)
	if err != nil {
		t.Fatal(err)
	}
	ep = domain.LoadEndpoint(ep.Changes())
	set.Answer = &domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X-A", Value: "1"}}, Body: []byte("ok")}
	set.Handshakes = &domain.Handshakes{Enabled: []domain.Handshake{domain.HandshakeZoom}, ZoomSecret: "s"}
	if err := ep.Reconfigure("", set); err != nil {
		t.Fatal(err)
	}
	ch := ep.Changes()
	if len(ch) != 1 {
		t.Fatalf("changes %+v, want one", ch)
	}
	ev := ch[0].(domain.EndpointReconfigured)
	if ev.Answer == nil || ev.Answer.Status != 200 || string(ev.Answer.Body) != "ok" || ev.Handshakes == nil || ev.Handshakes.ZoomSecret != "s" {
		t.Fatalf("event %+v", ev)
	}
	again := domain.LoadEndpoint(append([]domain.Event{domain.EndpointCreated{EndpointID: "ep1", AccountID: "acc", Name: "hooks", Mode: domain.ModeLog}}, ev))
	same := set
	same.Answer = &domain.Answer{Status: 200, Headers: []domain.Header{{Name: "X-A", Value: "1"}}, Body: []byte("ok")}
	if err := again.Reconfigure("", same); err != nil || len(again.Changes()) != 0 {
		t.Fatalf("the same settings raised %+v (%v)", again.Changes(), err)
	}
	reset := set
	reset.Answer, reset.Handshakes = &domain.Answer{Status: 204}, &domain.Handshakes{}
	if err := again.Reconfigure("", reset); err != nil {
		t.Fatal(err)
	}
	if ev := again.Changes()[0].(domain.EndpointReconfigured); ev.Answer != nil || ev.Handshakes != nil {
		t.Fatalf("a reset to the defaults recorded %+v", ev)
	}
	set.Answer = &domain.Answer{Status: 200, Body: make([]byte, domain.MaxAnswerBody+1)}
	if err := again.Reconfigure("", set); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("an oversize body gave %v", err)
	}
}

func TestInspectorSetAnswers(t *testing.T) {
	in, err := domain.NewInspector("insp", 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	in = domain.LoadInspector(in.Changes())
	a := &domain.Answer{Status: 201}
	if err := in.SetAnswers(a, nil); err != nil {
		t.Fatal(err)
	}
	if ch := in.Changes(); len(ch) != 1 || ch[0].(domain.InspectorAnswerSet).Answer.Status != 201 {
		t.Fatalf("changes %+v", ch)
	}
	loaded := domain.LoadInspector(append([]domain.Event{domain.InspectorCreated{InspectorID: "insp", IdleTTLMs: 1000}}, in.Changes()...))
	if got, _ := loaded.Answers(); got == nil || got.Status != 201 {
		t.Fatalf("loaded answer %+v", got)
	}
	if err := loaded.SetAnswers(&domain.Answer{Status: 201}, nil); err != nil || len(loaded.Changes()) != 0 {
		t.Fatalf("the same answer raised %+v (%v)", loaded.Changes(), err)
	}
	expired := domain.LoadInspector([]domain.Event{domain.InspectorCreated{InspectorID: "insp", IdleTTLMs: 1000}, domain.InspectorExpired{InspectorID: "insp"}})
	if err := expired.SetAnswers(a, nil); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("an expired inspector gave %v", err)
	}
}
