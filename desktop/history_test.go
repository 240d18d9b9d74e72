package desktop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDeliveryCarriesProviderAndSignature: the delivery the detail pane
// renders has what the relay knows of its provider (name, event type, the
// provider's delivery id), how many times the provider sent it, and each
// attempt's signature verdict, here reported by relay listen --verify on
// the same Endpoint; and the answer the local process gave.
func TestDeliveryCarriesProviderAndSignature(t *testing.T) {
	l := startListening(t, "history", "github", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-Local", "yes")
		w.WriteHeader(http.StatusAccepted)
	}), nil, []string{"RELAY_VERIFY_SECRET=s3cret"}, "--verify", "github")
	r, ui, e := l.r, l.ui, l.endpoint

	body := []byte(`{"ref":"refs/heads/main"}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	headers := [][2]string{{"X-GitHub-Event", "push"}, {"X-GitHub-Delivery", "d-42"}, {"X-Hub-Signature-256", "sha256=" + hex.EncodeToString(m.Sum(nil))}}
	for range 2 { // the provider sends it again: a redelivery
		if resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/gh", Host: r.AddressHost(e.ID), Headers: headers, Body: body}); resp.Status != http.StatusAccepted {
			t.Fatalf("sender got %d, want the local 202", resp.Status)
		}
	}
	id := l.latestDelivery(t)

	type delivery struct {
		Provider *struct {
			Name, EventType, DeliveryID string
		}
		Duplicates int
		Attempts   []struct {
			Signature *string
		}
		ResponseStatus  int
		ResponseHeaders []struct{ Name, Value string }
	}
	var d delivery
	harness.Eventually(t, 10*time.Second, "the verdict and the redelivery recorded", func() bool {
		raw, err := ui.Delivery(id)
		if err != nil {
			t.Fatal(err)
		}
		d = delivery{}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		return len(d.Attempts) == 1 && d.Attempts[0].Signature != nil && d.Duplicates > 0
	})
	if p := d.Provider; p == nil || p.Name != "github" || p.EventType != "push" || p.DeliveryID != "d-42" {
		t.Errorf("provider %+v, want github push d-42", p)
	}
	if d.Duplicates != 1 {
		t.Errorf("duplicates %d, want 1 (sent twice)", d.Duplicates)
	}
	if got := *d.Attempts[0].Signature; got != "github valid" {
		t.Errorf("signature %q, want github valid", got)
	}
	if d.ResponseStatus != http.StatusAccepted || !slices.ContainsFunc(d.ResponseHeaders, func(h struct{ Name, Value string }) bool {
		return strings.EqualFold(h.Name, "X-Local") && h.Value == "yes"
	}) {
		t.Errorf("response %d %+v, want the local 202 with X-Local", d.ResponseStatus, d.ResponseHeaders)
	}

	// Edit and retry: the edit travels to the relay and is recorded with
	// the attempt; a malformed edit is refused naming its fault.
	raw, err := ui.Retry(id, json.RawMessage(`{"setHeaders":[{"name":"X-Debug","value":"1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var edited struct {
		Attempts []struct {
			Retry bool
			Edit  *struct {
				SetHeaders []struct{ Name, Value string }
			}
		}
	}
	if err := json.Unmarshal(raw, &edited); err != nil {
		t.Fatal(err)
	}
	if a := edited.Attempts; len(a) != 2 || !a[1].Retry || a[1].Edit == nil || len(a[1].Edit.SetHeaders) != 1 || a[1].Edit.SetHeaders[0].Name != "X-Debug" {
		t.Errorf("after an edited retry the attempts are %+v, want a second one recording the set X-Debug", a)
	}
	// The window's comparison is the relay's: the recorded request
	// against the edited retry shows the header the edit set.
	raw, err = ui.Compare(id, "original", "2")
	var cmp struct {
		Request []struct {
			Where         string
			Before, After *string
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, &cmp)
	}
	if err != nil || len(cmp.Request) != 1 || cmp.Request[0].Where != "header X-Debug" || cmp.Request[0].Before != nil || cmp.Request[0].After == nil || *cmp.Request[0].After != "1" {
		t.Errorf("compare original with 2: %v\n%s", err, raw)
	}
	if _, err := ui.Compare(id, "original", "9"); err == nil || !strings.Contains(err.Error(), "want original") {
		t.Errorf("compare with a 9th of 2 attempts: %v, want the attempts it may name", err)
	}
	if _, err := ui.Retry(id, json.RawMessage(`{"path":"no-slash"}`)); err == nil || !strings.Contains(err.Error(), "path") {
		t.Errorf("a malformed edit: %v, want an error naming the path", err)
	}
	if raw, err := ui.Retry(id, nil); err != nil || strings.Count(string(raw), `"retry":true`) != 2 {
		t.Errorf("a retry as recorded: %v\n%s", err, raw)
	}
}
