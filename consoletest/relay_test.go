package consoletest

import (
	"net/http"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

// send makes a request to an address's public URL, as a sender would.
func send(t *testing.T, address, method, path string, header http.Header, body []byte) (int, string) {
	t.Helper()
	req := harness.RawRequest{Method: method, Target: path, Host: srv.AddressHost(address), Body: body}
	for name, values := range header {
		for _, v := range values {
			req.Headers = append(req.Headers, [2]string{name, v})
		}
	}
	resp := srv.SendRaw(t, req)
	return resp.Status, string(resp.Body)
}

func newInspector(t *testing.T) string {
	t.Helper()
	var out struct {
		CreateInspector struct{ ID string } `json:"createInspector"`
	}
	srv.MustGraphQL(t, "", `mutation { createInspector { id } }`, nil, &out)
	return out.CreateInspector.ID
}
