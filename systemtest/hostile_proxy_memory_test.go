package systemtest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestProxiedBodiesWithinBudget: a PROXY Endpoint holds each body whole
// until the local answer is back, so many large bodies at once must not
// take the relay's memory with them. Sixty senders post 10 MB each to an
// Endpoint whose local process reads the request and never answers: those
// that fit the body budget (its account's share of it) are forwarded (and
// time out), the others are answered 503 with Retry-After and the reason,
// every one of them is recorded, and the relay's memory grows by about
// that share, not by sixty bodies.
func TestProxiedBodiesWithinBudget(t *testing.T) {
	const (
		senders = 60
		size    = 10 << 20
	)
	// Sixty senders, as a proxy in front names them, each in a network of
	// its own: the budget's shares per client and per network do not
	// decide here, the account's does (a quarter of the budget, one body:
	// ingress.AccountBodyShare).
	r := harness.Start(t, t.TempDir(), "--proxy-body-budget", "64MiB", "--forward-timeout", "3s", "--trusted-proxies", "127.0.0.1")
	stall := make(chan struct{})
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		<-stall // reads every request and never answers
	}))
	defer local.Close()
	defer close(stall)
	ten := signUpTenant(t, r, "budget")
	ep := proxyEndpoint(t, r, ten.Token, strings.TrimPrefix(local.URL, "http://"), false)
	startAgentFor(t, r, ten.Token, ep.ID, strings.TrimPrefix(local.URL, "http://"))

	before := peakRSSKiB(t, r)
	body := bytes.Repeat([]byte("x"), size)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	var refusal string
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, head, text := rawPost(t, r, ep.ID, "198.18."+strconv.Itoa(i+1)+".7", body)
			mu.Lock()
			defer mu.Unlock()
			statuses[status]++
			if status == http.StatusServiceUnavailable && refusal == "" {
				refusal = head + text
			}
		}()
	}
	wg.Wait()
	grew := peakRSSKiB(t, r) - before
	t.Logf("statuses %v; peak RSS grew %d MiB", statuses, grew>>10)
	if statuses[http.StatusServiceUnavailable] == 0 || statuses[http.StatusGatewayTimeout] == 0 ||
		statuses[http.StatusServiceUnavailable]+statuses[http.StatusGatewayTimeout] != senders {
		t.Errorf("statuses %v: want some forwarded (504 from the stalled target) and the rest refused 503", statuses)
	}
	if !strings.Contains(refusal, "Retry-After: 1") || !strings.Contains(refusal, "No agent for client\nrelay busy") {
		t.Errorf("a refusal for the budget reads %q, want Retry-After and the reason on its second line", refusal)
	}
	// Unbounded, each forwarded body is held whole, then again in the
	// forward to the agent: sixty of them, well over a gigabyte.
	if grew > 512<<10 {
		t.Errorf("peak RSS grew %d MiB with a 64 MiB body budget, want under 512 MiB", grew>>10)
	}
	harness.Eventually(t, 30*time.Second, "every sender recorded", func() bool {
		return len(endpointHistory(t, r, ten.Token, ep.ID)) == senders
	})
}

// rawPost sends body to an address over its own connection and reads the
// answer's status, head and body; a relay that answers before the body is
// sent is read all the same. client is sent as X-Forwarded-For.
func rawPost(t *testing.T, r *harness.Relay, address, client string, body []byte) (status int, head, text string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 10*time.Second)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	go func() {
		_, _ = conn.Write([]byte("POST /big HTTP/1.1\r\nHost: " + r.AddressHost(address) +
			"\r\nX-Forwarded-For: " + client + "\r\nContent-Type: application/octet-stream\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"))
		_, _ = conn.Write(body)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Errorf("reading the answer: %v", err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h strings.Builder
	_ = resp.Header.Write(&h)
	return resp.StatusCode, h.String(), string(b)
}
