package desktop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestDeliveryWithBigAnswersOpens: a delivery whose attempts were answered
// with several MB each opens in the detail pane, and retries of it answer.
// The pane shows the latest answer (the delivery's response fields) and
// compares attempts on the relay, so the window asks for no attempt's
// stored answer: asking for every one made the answer to an open of the
// delivery, or to a retry, grow by each answer's base64, past the API's
// 32 MiB at the third answer of 8 MB, and past one read of the log at the
// seventh.
func TestDeliveryWithBigAnswersOpens(t *testing.T) {
	const answerSize = 8 << 20
	random := make([]byte, answerSize/2)
	rand.Read(random)
	answer := []byte(hex.EncodeToString(random)) // text that compresses little
	l := startListening(t, "big-answers", "big", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(answer)
	}), func(l *listening) {
		// Answers are stored only where the Endpoint captures them.
		l.r.MustGraphQL(t, l.token, `mutation($id: ID!){ updateEndpoint(id: $id, input: {responseCapture: true}){ id } }`, map[string]any{"id": l.endpoint.ID}, nil)
	}, nil)
	r, ui, e := l.r, l.ui, l.endpoint
	if resp := r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/big", Host: r.AddressHost(e.ID), Body: []byte(`{}`)}); resp.Status != http.StatusOK {
		t.Fatalf("sender got %d, want the local 200", resp.Status)
	}
	id := l.latestDelivery(t)

	const attempts = 8
	for i := 2; i <= attempts; i++ {
		if _, err := ui.Retry(id, nil); err != nil {
			t.Fatalf("retry %d of a delivery with %d answers of 8 MB: %v", i, i-1, err)
		}
	}
	raw, err := ui.Delivery(id)
	if err != nil {
		t.Fatalf("the detail of a delivery with %d answers of 8 MB: %v", attempts, err)
	}
	var d struct {
		Attempts       []struct{ Status *int }
		ResponseStatus int
		ResponseBody   *string
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Attempts) != attempts || d.ResponseStatus != http.StatusOK {
		t.Errorf("%d attempts answered %d, want %d answered 200", len(d.Attempts), d.ResponseStatus, attempts)
	}
	// The pane shows the latest answer whole.
	if d.ResponseBody == nil || len(*d.ResponseBody) < answerSize {
		n := 0
		if d.ResponseBody != nil {
			n = len(*d.ResponseBody)
		}
		t.Errorf("the latest answer's body is %d bytes, want the whole %d", n, answerSize)
	}
}
