package cmdutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/relayhq/relay/apiclient"
	"github.com/relayhq/relay/deliveryjson"
)

// repeated is prefix, n copies of elem separated by commas, and suffix.
func repeated(prefix, elem string, n int, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n*(len(elem)+1) + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(elem)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

// TestAnswersAreBoundedAsTheyArrive: a command's client, over http and
// over https with --ca-file (a transport of its own), refuses an answer
// of a relay as it arrives, never decoded, once the part read weighs more
// decoded than its budget, as apiclient.Do counts and weighs every answer
// (apiclient.TestAnswersAreCountedAsTheyArrive for the counts). Before,
// 1 048 560 empty attempts, 3 MiB within the counts, decoded into
// 152-byte structs: 904.7 MiB allocated and 178.9 MiB held. A relay's
// answer within the bounds decodes.
func TestAnswersAreBoundedAsTheyArrive(t *testing.T) {
	type delivery struct {
		Attempts []deliveryjson.Attempt
		Headers  []deliveryjson.Header
	}
	answers := map[string][]byte{
		"weight": repeated(`{"data":{"delivery":{"attempts":[`, "{}", apiclient.MaxAnswerObjects-16, `]}}}`),
		"within": repeated(`{"data":{"delivery":{"attempts":[{"id":"a"}],"headers":[`, `{"name":"a","value":"","valueBase64":null}`, 1000, `]}}}`),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var req struct{ Query string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		_, _ = w.Write(answers[req.Query])
	})
	plain := httptest.NewServer(handler)
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(handler)
	t.Cleanup(secure.Close)
	pool := x509.NewCertPool()
	pool.AddCert(secure.Certificate())
	for _, conn := range []*Connection{{Server: plain.URL}, {Server: secure.URL, TLS: &tls.Config{RootCAs: pool}}} {
		client := conn.Client("t")
		ask := func(answer string, out any) (error, float64) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := client.Do(context.Background(), answer, nil, out)
			runtime.ReadMemStats(&after)
			return err, float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
		}
		var res struct{ Delivery delivery }
		err, allocated := ask("weight", &res)
		t.Logf("%s: %v; allocated %.1f MiB", conn.Server, err, allocated)
		var tooLarge *apiclient.DecodeTooLargeError
		if !errors.As(err, &tooLarge) {
			t.Errorf("%s: Do = %v, want the answer refused for what it decodes into", conn.Server, err)
		}
		if allocated > 2 {
			t.Errorf("%s: refusing the answer allocated %.1f MiB, want at most 2", conn.Server, allocated)
		}
		if err, _ := ask("within", &res); err != nil || len(res.Delivery.Headers) != 1000 || res.Delivery.Attempts[0].ID != "a" {
			t.Errorf("%s: an answer of 1000 header fields: %d decoded, %v", conn.Server, len(res.Delivery.Headers), err)
		}
	}
}
