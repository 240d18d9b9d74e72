package systemtest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/systemtest/harness"
)

// h2Transport is one HTTP/2 connection's worth of client: every request of
// it goes over the same TLS connection to the relay, from 127.0.0.1.
func h2Transport(r *harness.Relay, local string) *http.Transport {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, "127.0.0.1:"+strconv.Itoa(r.Port))
		},
		TLSClientConfig:    r.ClientTLS(),
		ForceAttemptHTTP2:  true,
		DisableCompression: true,
		MaxConnsPerHost:    1, // one TCP connection: all streams multiplexed on it
	}
}

// openH2Streams opens n smee streams of the address at path over one
// HTTP/2 connection and returns how many the relay answered 200, keeping
// them open until the test ends.
func openH2Streams(t *testing.T, r *harness.Relay, tr *http.Transport, host, path string, n int) int {
	t.Helper()
	c := &http.Client{Transport: tr}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := c.Do(req)
			if err != nil {
				return
			}
			if resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				return
			}
			ok.Add(1)
			t.Cleanup(func() { resp.Body.Close() })
		}()
	}
	wg.Wait()
	return int(ok.Load())
}

// TestSmeeStreamsPerClient: over HTTP/2 (the relay offers h2 with
// --tls-cert) one connection carries up to 250 streams, so the connection
// cap does not bound a client's smee streams: the relay counts them per
// client (its IP, or its /64). One client asking for 200 streams of two
// Endpoints over one connection gets ingress.MaxStreamsPerClient of them;
// another client's stream is still served.
func TestSmeeStreamsPerClient(t *testing.T) {
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key)
	victimID, _ := createSmeeInspector(t, r)

	a := signUpTenant(t, r, "streams")
	var paths []struct{ host, path string }
	for i := range 2 {
		ep := createEndpointFor(t, r, a.Token, map[string]any{"name": fmt.Sprintf("e%d", i), "mode": "LOG"})
		var issued struct{ IssueSmeeKey struct{ URL string } }
		r.MustGraphQL(t, a.Token, `mutation($id: ID!){ issueSmeeKey(endpointId: $id){ url } }`, map[string]any{"id": ep.ID}, &issued)
		_, k, ok := strings.Cut(issued.IssueSmeeKey.URL, "/smee/")
		if !ok {
			t.Fatalf("issueSmeeKey: %+v", issued)
		}
		paths = append(paths, struct{ host, path string }{r.AddressHost(ep.ID), "/smee/" + k})
	}
	r.CloseIdleConnections()

	tr := h2Transport(r, "127.0.0.1")
	defer tr.CloseIdleConnections()
	total := 0
	for _, p := range paths {
		total += openH2Streams(t, r, tr, p.host, p.path, 100)
	}
	t.Logf("one client asked for 200 streams over one HTTP/2 connection: %d open", total)
	if total != ingress.MaxStreamsPerClient {
		t.Errorf("one client holds %d smee streams, want %d (ingress.MaxStreamsPerClient)", total, ingress.MaxStreamsPerClient)
	}

	// Another client, from 127.0.0.2, over HTTP/1.1.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	vtr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, "127.0.0.1:"+strconv.Itoa(r.Port))
		},
		TLSClientConfig: r.ClientTLS(),
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	vtr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	defer vtr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, "https://"+r.AddressHost(victimID)+"/", nil)
	req.Header.Set("Accept", "text/event-stream")
	c := &http.Client{Transport: vtr, Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("another client's smee stream was refused %d", resp.StatusCode)
	}
}
