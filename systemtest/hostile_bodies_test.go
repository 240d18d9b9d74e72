package systemtest

import (
	"bufio"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestJSONFiltersBounded: json: filters look inside a body with a bounded
// scanner, so large JSON bodies sent to a filtered Endpoint cost the relay
// about the bodies themselves (held within the proxy body budget), not a
// tree of Go values many times their size. Twenty-four senders (four
// clients, six each) post 10 MiB of `[{},{},...]` at once, first to an
// Endpoint whose own filter is json: (a listener is connected), then to an
// Endpoint where only the listener's filter is json:. Each is filtered
// (204, recorded); the relay's peak RSS stays under maxPeakRSS. Decoding
// every body whole, as filters once did, took it past a gigabyte.
func TestJSONFiltersBounded(t *testing.T) {
	const (
		clients    = 4
		perClient  = 6
		size       = 10 << 20
		maxPeakRSS = 512 << 10 // KiB
	)
	// All 24 bodies go to one account's Endpoints, which hold at most a
	// quarter of the body budget (ingress.AccountBodyShare): a budget of
	// 1 GiB lets all of them in at once, so the filters, not the budget,
	// decide, and the peak is what 240 MiB of bodies being filtered costs.
	r := harness.Start(t, t.TempDir(), "--trusted-proxies", "127.0.0.1", "--proxy-body-budget", "1GiB")
	h, acct := loggedInHome(t, r)
	_, port := answeringTarget(t, 200, "ok")
	endpointFiltered := createEndpointFor(t, r, acct.Token, map[string]any{"name": "ep-filter", "mode": "PROXY", "target": "localhost:" + port,
		"filterTexts": []string{"json:data.object.status=paid"}})
	listenerFiltered := createEndpointFor(t, r, acct.Token, map[string]any{"name": "listener-filter", "mode": "PROXY", "target": "localhost:" + port})
	l1 := h.startIn(t, t.TempDir(), "listen", port, "ep-filter", "--filter", "json:type=invoice.paid")
	waitOutput(t, l1, regexp.MustCompile(`(?m)^endpoint ep-filter .*: primary`))
	l2 := h.startIn(t, t.TempDir(), "listen", port, "listener-filter", "--filter", "json:type=invoice.paid")
	waitOutput(t, l2, regexp.MustCompile(`(?m)^endpoint listener-filter .*: primary`))

	body := emptyObjectsBody(size)
	for _, tc := range []struct {
		name, address, why string
	}{
		{"the Endpoint's filter", endpointFiltered.ID, "the Endpoint's filters: json data.object.status not examined: body larger than 256 KiB"},
		{"a listener's filter", listenerFiltered.ID, "no listener matched: json type not examined: body larger than 256 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			statuses := map[int]int{}
			for c := range clients {
				for range perClient {
					wg.Add(1)
					go func() {
						defer wg.Done()
						// Four networks: one network holds at most half the
						// body budget (ingress.NetworkBodyShare).
						status := postJSON(t, r, tc.address, "10.0."+strconv.Itoa(c+1)+".1", body)
						mu.Lock()
						statuses[status]++
						mu.Unlock()
					}()
				}
			}
			wg.Wait()
			peak := peakRSSKiB(t, r)
			t.Logf("statuses %v; relay peak RSS %d MiB", statuses, peak>>10)
			if statuses[http.StatusNoContent] != clients*perClient {
				t.Errorf("statuses %v: want every body filtered (204)", statuses)
			}
			if peak > maxPeakRSS {
				t.Errorf("relay peak RSS %d MiB, want under %d MiB", peak>>10, maxPeakRSS>>10)
			}
			seen := map[string]bool{}
			if x := explainOf(t, r, acct.Token, newestDelivery(t, r, acct.Token, tc.address, seen)); !regexp.MustCompile(regexp.QuoteMeta(tc.why)).MatchString(x.Why.Summary) {
				t.Errorf("explanation %q, want it to say %q", x.Why.Summary, tc.why)
			}
		})
	}
}

// emptyObjectsBody is `[{},{},...]` of about n bytes: the JSON that costs
// the most Go values per byte when decoded whole.
func emptyObjectsBody(n int) []byte {
	b := make([]byte, 0, n+3)
	b = append(b, '[')
	for len(b) < n {
		b = append(b, "{},"...)
	}
	b[len(b)-1] = ']'
	return b
}

// postJSON sends a JSON body to an address over its own connection, client
// given as X-Forwarded-For, and returns the answer's status.
func postJSON(t *testing.T, r *harness.Relay, address, client string, body []byte) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 10*time.Second)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	go func() {
		_, _ = conn.Write([]byte("POST /events HTTP/1.1\r\nHost: " + r.AddressHost(address) + "\r\nX-Forwarded-For: " + client +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"))
		_, _ = conn.Write(body)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("reading the answer: %v", err)
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
