package systemtest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

// writeHard sends a request head and then body in 64 KiB writes as fast as
// the socket takes them, and reads the answer only once it has written
// everything or a write failed: a client that does not stop to listen
// while it sends. Many clients (Node's net and http among them) drop the
// connection, and the answer waiting in it, on a failed write, so a failed
// write is a failure here too. It returns the status, or the error.
func writeHard(r *harness.Relay, host, path string, body []byte) (int, error) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = conn.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: " + host +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"))
	for off := 0; off < len(body); off += 64 << 10 {
		if _, err := conn.Write(body[off:min(off+64<<10, len(body))]); err != nil {
			return 0, fmt.Errorf("writing the body: %w", err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestOversizeAnswerReachesAWriter: a client that keeps writing a body over
// the limit reads its 413, every time, from the API (over --max-api-body)
// and from a PROXY Endpoint (over --max-body): the relay keeps reading
// what is still sent, within bounds, instead of closing on unread input,
// which resets the connection and destroys the answer.
func TestOversizeAnswerReachesAWriter(t *testing.T) {
	r := harness.Start(t, t.TempDir(), "--max-body", "1MiB")
	ten := signUpTenant(t, r, "linger")
	ep := proxyEndpoint(t, r, ten.Token, "127.0.0.1:1", false)
	body := bytes.Repeat([]byte("a"), 5<<20)
	for _, tt := range []struct {
		name, host, path string
	}{
		{"API", "localhost:" + strconv.Itoa(r.Port), "/graphql"},
		{"PROXY Endpoint", r.AddressHost(ep.ID), "/hook"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := 0
			for i := range 20 {
				status, err := writeHard(r, tt.host, tt.path, body)
				if err != nil || status != http.StatusRequestEntityTooLarge {
					t.Errorf("try %d: status %d, %v; want 413", i+1, status, err)
					continue
				}
				got++
			}
			t.Logf("%d of 20 read their 413", got)
		})
	}
}
