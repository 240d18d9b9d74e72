package graph_test

import (
	"context"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/client"
)

// TestOwnAnswerAPI: updateEndpoint and setInspectorAnswer set an address's
// answer and handshakes; the API shows them back with secrets masked, a
// handshakes change keeps the secrets not given, and bad input is
// INVALID_INPUT naming the field.
func TestOwnAnswerAPI(t *testing.T) {
	e := newEnv(t)
	var su struct{ SignUp struct{ Token string } }
	e.c.MustPost(`mutation { signUp(name: "ada") { token } }`, &su)
	auth := client.AddHeader("Authorization", "Bearer "+su.SignUp.Token)
	var ep struct{ CreateEndpoint struct{ ID string } }
	e.c.MustPost(`mutation { createEndpoint(input: {name: "log", mode: LOG}) { id } }`, &ep, auth)
	type shown struct {
		Answer struct {
			Status  int
			Headers []struct{ Name, Value string }
			Body    string
		}
		Handshakes struct {
			Enabled            []string
			MetaVerifyTokenSet bool
			MetaVerifyToken    *string
			ZoomSecretSet      bool
			InProxy            string
		}
	}
	const fields = `answer { status headers { name value } body } handshakes { enabled metaVerifyTokenSet metaVerifyToken zoomSecretSet inProxy }`
	var up struct{ UpdateEndpoint shown }
	e.c.MustPost(`mutation($id: ID!) { updateEndpoint(id: $id, input: {
		answer: {status: 200, headers: [{name: "Content-Type", value: "text/plain"}], body: "ok"},
		handshakes: {enabled: [META, ZOOM], metaVerifyToken: "verify-12345678", zoomSecret: "zoom-secret-abcdef", inProxy: RELAY}}) { `+fields+` } }`,
		&up, auth, client.Var("id", ep.CreateEndpoint.ID))
	got := up.UpdateEndpoint
	if got.Answer.Status != 200 || got.Answer.Body != "ok" || len(got.Answer.Headers) != 1 ||
		strings.Join(got.Handshakes.Enabled, ",") != "META,ZOOM" || !got.Handshakes.MetaVerifyTokenSet ||
		got.Handshakes.MetaVerifyToken == nil || *got.Handshakes.MetaVerifyToken != "••••" || !got.Handshakes.ZoomSecretSet || got.Handshakes.InProxy != "RELAY" {
		t.Fatalf("shown %+v", got)
	}
	// The log holds neither secret, only their stored forms.
	events, err := e.store.ReadAll(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var forms int
	for _, ev := range events {
		for _, secret := range []string{"verify-12345678", "zoom-secret-abcdef"} {
			if strings.Contains(string(ev.Data), secret) {
				t.Fatalf("event %s holds the secret %q: %s", ev.Type, secret, ev.Data)
			}
		}
		if strings.Contains(string(ev.Data), `"meta_verify_token_mac":"hmac-sha256:v1:`) && strings.Contains(string(ev.Data), `"zoom_secret_sealed":"aes256gcm:v1:`) {
			forms++
		}
	}
	if forms != 1 {
		t.Fatalf("%d events hold both stored forms, want 1", forms)
	}
	// Changing the list alone keeps the secrets.
	e.c.MustPost(`mutation($id: ID!) { updateEndpoint(id: $id, input: {handshakes: {enabled: [ZOOM, SLACK]}}) { `+fields+` } }`,
		&up, auth, client.Var("id", ep.CreateEndpoint.ID))
	if got := up.UpdateEndpoint; strings.Join(got.Handshakes.Enabled, ",") != "ZOOM,SLACK" || !got.Handshakes.ZoomSecretSet || got.Answer.Body != "ok" {
		t.Fatalf("after a list change: %+v", got)
	}

	// createEndpoint takes them too.
	var created struct{ CreateEndpoint shown }
	e.c.MustPost(`mutation { createEndpoint(input: {name: "c", mode: LOG, answer: {status: 200, body: "hi"},
		handshakes: {enabled: [SLACK]}}) { `+fields+` } }`, &created, auth)
	if got := created.CreateEndpoint; got.Answer.Status != 200 || got.Answer.Body != "hi" || strings.Join(got.Handshakes.Enabled, ",") != "SLACK" {
		t.Fatalf("created %+v", got)
	}
	if err := e.c.Post(`mutation { createEndpoint(input: {name: "d", mode: LOG, handshakes: {enabled: [ZOOM]}}) { id } }`, &struct{}{}, auth); code(err) != "INVALID_INPUT" ||
		!strings.Contains(err.Error(), `"field":"handshakes.zoomSecret"`) {
		t.Errorf("a zoom handshake without secret at creation gave %v", err)
	}

	var in struct{ CreateInspector struct{ ID string } }
	e.c.MustPost(`mutation { createInspector { id } }`, &in)
	var set struct{ SetInspectorAnswer shown }
	e.c.MustPost(`mutation($id: ID!) { setInspectorAnswer(id: $id, answer: {status: 201, bodyBase64: "AP8="}, handshakes: {enabled: [DROPBOX]}) { `+fields+` } }`,
		&set, client.Var("id", in.CreateInspector.ID))
	if got := set.SetInspectorAnswer; got.Answer.Status != 201 || got.Answer.Body != "AP8=" || strings.Join(got.Handshakes.Enabled, ",") != "DROPBOX" {
		t.Fatalf("inspector shown %+v", got)
	}

	for _, tc := range []struct {
		name, query, field string
	}{
		{"body over 64 KiB", `mutation($id: ID!) { setInspectorAnswer(id: $id, answer: {status: 200, body: "` + strings.Repeat("a", 64<<10+1) + `"}) { id } }`, "answer.body"},
		{"header value", `mutation($id: ID!) { setInspectorAnswer(id: $id, answer: {status: 200, headers: [{name: "X-A", value: "a\nb"}]}) { id } }`, "answer.headers[0].value"},
		{"status", `mutation($id: ID!) { setInspectorAnswer(id: $id, answer: {status: 1000}) { id } }`, "answer.status"},
		{"meta without token", `mutation($id: ID!) { setInspectorAnswer(id: $id, handshakes: {enabled: [META]}) { id } }`, "handshakes.metaVerifyToken"},
		{"bad base64", `mutation($id: ID!) { setInspectorAnswer(id: $id, answer: {status: 200, bodyBase64: "%%"}) { id } }`, "answer.bodyBase64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.c.Post(tc.query, &struct{}{}, client.Var("id", in.CreateInspector.ID))
			if code(err) != "INVALID_INPUT" || !strings.Contains(err.Error(), `"field":"`+tc.field+`"`) {
				t.Fatalf("got %v, want INVALID_INPUT naming %s", err, tc.field)
			}
		})
	}
	if err := e.c.Post(`mutation { setInspectorAnswer(id: "nosuchinspector", answer: {status: 200}) { id } }`, &struct{}{}); code(err) != "NOT_FOUND" {
		t.Errorf("an unknown inspector gave %v", err)
	}
	if err := e.c.Post(`mutation($id: ID!) { updateEndpoint(id: $id, input: {answer: {status: 200}}) { id } }`, &struct{}{}, client.Var("id", ep.CreateEndpoint.ID)); code(err) != "UNAUTHENTICATED" {
		t.Errorf("an update without token gave %v", err)
	}
}
