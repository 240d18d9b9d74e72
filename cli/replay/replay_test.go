package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestMaxInFlightBoundsTheRequestsSent: --max-in-flight is the replay's
// byte budget. Two requests of 2 KiB go with --concurrency 2 to a server
// that answers the first only once the second has come: with
// --max-in-flight 1KiB the second waits for the first to end, so the
// first gets no answer within --timeout, and the second then gets its.
// Without the budget both would be in flight and both answered.
func TestMaxInFlightBoundsTheRequestsSent(t *testing.T) {
	var (
		mu      sync.Mutex
		arrived int
		second  = make(chan struct{}) // closed when the second request comes
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		first := arrived == 1
		if arrived == 2 {
			close(second)
		}
		mu.Unlock()
		if first {
			select {
			case <-second:
			case <-r.Context().Done(): // the replay gave up on it
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)

	body := strings.Repeat("x", 2<<10)
	var b strings.Builder
	b.WriteString(`{"relay_bundle":1,"address":"a","url":"http://a.localhost/","exportedAt":"2026-01-02T03:04:05Z","creator":"relay test"}` + "\n")
	for i := range 2 {
		fmt.Fprintf(&b, `{"id":"d%d","method":"POST","path":"/p%d","headers":[{"name":"Content-Length","value":"%d"}],"bodyBase64":"%s","complete":true}`+"\n",
			i, i, len(body), base64.StdEncoding.EncodeToString([]byte(body)))
	}
	path := filepath.Join(t.TempDir(), "two.bundle")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	run := func(flags ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := Command(&out)
		cmd.SetArgs(append([]string{path, "--to", srv.URL, "--concurrency", "2", "--timeout", "2s"}, flags...))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	out, err := run("--max-in-flight", "1KiB")
	if !strings.Contains(out, "POST /p0 → no answer") || !strings.Contains(out, "POST /p1 → 204") {
		t.Fatalf("with --max-in-flight 1KiB: %v\n%s\nwant /p0 unanswered (sent alone) and /p1 answered after it", err, out)
	}
}

// TestMaxInFlightRefusesNoSize: --max-in-flight takes a size above zero.
func TestMaxInFlightRefusesNoSize(t *testing.T) {
	for _, v := range []string{"0", "lots", "-1MiB"} {
		var out bytes.Buffer
		cmd := Command(&out)
		cmd.SetArgs([]string{"b.bundle", "--to", "http://127.0.0.1:1", "--max-in-flight", v})
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "max-in-flight") {
			t.Errorf("--max-in-flight %s: %v, want a refusal naming the flag", v, err)
		}
	}
}
