package systemtest

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/relayhq/relay/systemtest/harness"
)

func TestMetricsEndpoint(t *testing.T) {
	r := harness.Start(t, "")
	id, _ := createInspector(t, r)
	r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/m", Host: r.AddressHost(id)})
	r.SendRaw(t, harness.RawRequest{Method: "POST", Target: "/m", Host: r.AddressHost("unknownaddress")})
	req, _ := http.NewRequest(http.MethodGet, r.BareURL()+"/metrics", nil)
	resp, err := harness.Client.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`relay_http_requests_total{area="address",code="204"} 1`,
		`relay_http_requests_total{area="address",code="503"} 1`,
		`relay_views_position`, `relay_log_position`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%.2000s", want, body)
		}
	}
}
