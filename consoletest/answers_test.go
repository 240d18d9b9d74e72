package consoletest

import (
	"net/http"
	"strings"
	"testing"
)

// The Endpoint settings form sets the own answer and handshakes: a request
// then gets the answer typed in, a Slack handshake is answered by the
// relay, the Zoom secret is never shown back, and an answer the relay
// refuses shows the field at fault.
func TestSettingsFormSetsTheAnswer(t *testing.T) {
	token := signUp(t, "Ada")
	var created struct {
		CreateEndpoint struct{ ID string } `json:"createEndpoint"`
	}
	srv.MustGraphQL(t, token, `mutation { createEndpoint(input: {name: "Answers", mode: LOG}) { id } }`, nil, &created)
	id := created.CreateEndpoint.ID

	p := newPage(t, 1280, 900)
	p.open("/")
	p.waitFor("the sign-in form", `document.querySelector('input[name=token]')`) // once the relay said no session
	p.do(chromedpSetValue(`input[name=token]`, token))
	p.click(`form[aria-labelledby=signin-title] button[type=submit]`)
	p.waitFor("the Endpoints list", `document.querySelector('.endpoint-list a[href="/e/`+id+`"]')`)
	p.click(`.endpoint-list a[href="/e/` + id + `"]`)
	p.waitFor("the Endpoint page", `document.querySelector('#page-title')?.textContent === 'Answers'`)

	p.click(`details.settings summary`)
	if got := eval[string](p, `document.querySelector('details.settings input[name=answerStatus]').value`); got != "204" {
		t.Errorf("the answer status shows %q, want the default 204", got)
	}
	p.do(chromedpSetValue(`details.settings input[name=answerStatus]`, "200"))
	p.do(chromedpSetValue(`details.settings textarea[name=answerHeaders]`, "Content-Type: text/plain\nX-From: console"))
	p.do(chromedpSetValue(`details.settings textarea[name=answerBody]`, "thanks"))
	p.click(`details.settings input[name=handshake-SLACK]`)
	p.click(`details.settings input[name=handshake-ZOOM]`)
	p.do(chromedpSetValue(`details.settings input[name=zoomSecret]`, "zoom-secret-from-the-form"))
	p.click(`details.settings input[name=handshake-META]`)
	p.do(chromedpSetValue(`details.settings input[name=metaVerifyToken]`, "meta-token-from-the-form"))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the saved notice", `document.querySelector('details.settings .notice-success')`)
	eval[bool](p, `(document.querySelector('details.settings fieldset.answers').scrollIntoView(), true)`)
	p.screenshot("endpoint-answer.png")

	status, body := send(t, id, http.MethodPost, "/plain", nil, []byte("x"))
	if status != 200 || body != "thanks" {
		t.Errorf("a request got %d %q, want the answer set in the form", status, body)
	}
	status, body = send(t, id, http.MethodPost, "/slack", http.Header{"Content-Type": {"application/json"}},
		[]byte(`{"type":"url_verification","challenge":"from-slack"}`))
	if status != 200 || body != "from-slack" {
		t.Errorf("the Slack handshake got %d %q", status, body)
	}
	for _, secret := range []string{"zoom-secret-from-the-form", "meta-token-from-the-form"} {
		// innerHTML misses the inputs' values: those are read one by one.
		if eval[bool](p, `document.body.innerHTML.includes('`+secret+`') || [...document.querySelectorAll('input, textarea')].some((e) => e.value.includes('`+secret+`'))`) {
			t.Errorf("the page shows the secret %s after saving", secret)
		}
	}
	for _, name := range []string{"zoomSecret", "metaVerifyToken"} {
		if got := eval[string](p, `document.querySelector('details.settings input[name=`+name+`]').placeholder`); !strings.HasPrefix(got, "set") || strings.Contains(got, "••") {
			t.Errorf("the %s field says %q, want only that one is set", name, got)
		}
	}
	if !eval[bool](p, `document.querySelector('details.settings input[name=handshake-ZOOM]').checked`) {
		t.Error("the saved form does not show Zoom enabled")
	}

	// A refused answer names its field; nothing changes.
	p.do(chromedpSetValue(`details.settings textarea[name=answerHeaders]`, "Bad Name: 1"))
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the refusal", `document.querySelector('details.settings .notice-error')`)
	if got := p.text(`details.settings .notice-error`); !strings.Contains(got, "answer.headers[0].name") {
		t.Errorf("the refusal says %q, want the field at fault", got)
	}
	if status, body := send(t, id, http.MethodPost, "/after", nil, nil); status != 200 || body != "thanks" {
		t.Errorf("after a refusal a request got %d %q", status, body)
	}
}

// An inspector's page sets its answer and handshakes, with no account.
func TestInspectorAnswerForm(t *testing.T) {
	id := newInspector(t)
	p := newPage(t, 1280, 900)
	p.open("/i/" + id)
	p.waitFor("the inspector page", `document.querySelector('[data-testid=inspector-state]')`)
	p.click(`details.settings summary`)
	p.do(chromedpSetValue(`details.settings input[name=answerStatus]`, "202"))
	p.do(chromedpSetValue(`details.settings textarea[name=answerBody]`, "queued"))
	p.click(`details.settings input[name=handshake-DROPBOX]`)
	p.click(`details.settings button[type=submit]`)
	p.waitFor("the saved notice", `document.querySelector('details.settings .notice-success')`)
	if status, body := send(t, id, http.MethodPost, "/hook", nil, []byte("x")); status != 202 || body != "queued" {
		t.Errorf("a request got %d %q, want the answer set in the form", status, body)
	}
	if status, body := send(t, id, http.MethodGet, "/dbx?challenge=c-42", nil, nil); status != 200 || body != "c-42" {
		t.Errorf("the Dropbox handshake got %d %q", status, body)
	}
}
