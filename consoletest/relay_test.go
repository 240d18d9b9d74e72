package consoletest

import (
	"net/http"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// send makes a request to an address's public URL, as a sender would.
func send(t *testing.T, address, method, path string, header http.Header, body []byte) (int, string) {
	t.Helper()
	return sendTo(t, srv, address, method, path, header, body)
}

// sendTo is send to another relay than the shared one.
func sendTo(t *testing.T, r *harness.Relay, address, method, path string, header http.Header, body []byte) (int, string) {
	t.Helper()
	req := harness.RawRequest{Method: method, Target: path, Host: r.AddressHost(address), Body: body}
	for name, values := range header {
		for _, v := range values {
			req.Headers = append(req.Headers, [2]string{name, v})
		}
	}
	resp := r.SendRaw(t, req)
	return resp.Status, string(resp.Body)
}

func newInspector(t *testing.T) string {
	t.Helper()
	return newInspectorOn(t, srv)
}

// newInspectorOn creates an inspector on another relay than the shared one.
func newInspectorOn(t *testing.T, r *harness.Relay) string {
	t.Helper()
	var out struct {
		CreateInspector struct{ ID string } `json:"createInspector"`
	}
	r.MustGraphQL(t, "", `mutation { createInspector { id } }`, nil, &out)
	return out.CreateInspector.ID
}
