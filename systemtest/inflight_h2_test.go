package systemtest

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestRequestsInFlightPerClient: over HTTP/2 one connection carries up to
// 250 requests at once, so the connection cap does not bound what one
// client holds in flight; --max-requests-per-ip does, over all its
// connections. One client opens 40 smee streams (requests the relay holds)
// over one HTTP/2 connection under a cap of 16: 16 are served, 24 are
// answered 429 with Retry-After: 1 and counted on /metrics; another
// client's requests are served meanwhile; once the streams close, the first
// client is served again.
func TestRequestsInFlightPerClient(t *testing.T) {
	const limit, asked = 16, 40
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key, "--max-requests-per-ip", strconv.Itoa(limit))
	id, _ := createSmeeInspector(t, r)
	r.CloseIdleConnections()

	tr := h2Transport(r, "127.0.0.1")
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var (
		mu      sync.Mutex
		codes   = map[int]int{}
		bodies  []*http.Response
		wrongRA int
		wg      sync.WaitGroup
	)
	for range asked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, "https://"+r.AddressHost(id)+"/", nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := c.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[-1]++
				return
			}
			if resp.ProtoMajor != 2 {
				t.Errorf("a stream went over %s, not HTTP/2", resp.Proto)
			}
			codes[resp.StatusCode]++
			if resp.StatusCode == http.StatusOK {
				bodies = append(bodies, resp) // held open
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(b), "in flight")) {
				wrongRA++
			}
		}()
	}
	wg.Wait()
	t.Logf("one client asked for %d streams over one HTTP/2 connection under a cap of %d: %v", asked, limit, codes)
	if codes[http.StatusOK] != limit || codes[http.StatusTooManyRequests] != asked-limit || wrongRA != 0 {
		t.Errorf("answers %v (%d refusals without Retry-After: 1 or the reason); want %d × 200 and %d × 429", codes, wrongRA, limit, asked-limit)
	}

	// Another client, from 127.0.0.2, over its own HTTP/2 connection: its
	// stream and a plain request are served.
	other := &http.Client{Transport: h2Transport(r, "127.0.0.2"), Timeout: 30 * time.Second}
	defer other.Transport.(*http.Transport).CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+r.AddressHost(id)+"/", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another client's stream: %d", resp.StatusCode)
	}
	resp.Body.Close()
	metrics := func() string {
		resp, err := other.Get(r.BareURL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("another client's /metrics: %d", resp.StatusCode)
		}
		return string(b)
	}
	m := regexp.MustCompile(`(?m)^relay_http_requests_refused_total (\S+)$`).FindStringSubmatch(metrics())
	if m == nil || m[1] != strconv.Itoa(asked-limit) {
		t.Errorf("relay_http_requests_refused_total: %v, want %d", m, asked-limit)
	}

	// The first client's streams end: its requests are served again.
	for _, b := range bodies {
		b.Body.Close()
	}
	testwait.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		resp, err := c.Get(r.BareURL() + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errFromStatus(resp.StatusCode)
		}
		return nil
	})
}

type errFromStatus int

func (e errFromStatus) Error() string { return "status " + strconv.Itoa(int(e)) }
