package consoletest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"

	"github.com/relayhq/relay/systemtest/harness"
)

// TestConsoleOverTLS: the console served by `relay serve --tls-cert`:
// https URLs, live history over wss://, and a delivery sent over h2 shown
// with its sender.
func TestConsoleOverTLS(t *testing.T) {
	ca := harness.NewCA(t)
	cert, key := ca.Issue(t, t.TempDir(), 1, "*.localhost", "localhost")
	r := harness.StartTLS(t, "", ca, cert, key, "--anonymous-rate", "off")
	p := newPage(t, 1280, 800) // closed before the relay stops (cleanups run last first)
	// The test's CA is in no trust store Chromium reads: this tab's
	// browser context accepts the relay's certificate anyway.
	p.do(func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true})
		return chromedp.Void{}, err
	})
	p.openOn(r, "/")
	p.click(`[data-testid=new-inspector]`)
	p.waitFor("the inspector page", `/^\/i\/[^/]+$/.test(location.pathname)`)
	if proto := eval[string](p, `location.protocol`); proto != "https:" {
		t.Fatalf("console served over %s", proto)
	}
	id := strings.TrimPrefix(eval[string](p, `location.pathname`), "/i/")
	p.waitLive()
	want := fmt.Sprintf("https://%s.localhost:%s/", id, strconv.Itoa(r.Port))
	if got := p.text(`[data-testid=public-url]`); got != want {
		t.Errorf("public URL shown = %q, want %q", got, want)
	}
	resp, err := r.TLSClient(true).Post(want+"over/tls", "application/json", strings.NewReader(`{"tls":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.ProtoMajor != 2 {
		t.Fatalf("sender over h2: %s %s", resp.Proto, resp.Status)
	}
	p.openRow("/over/tls")
	if sender := p.text(`[data-testid=remote-address]`); !strings.HasPrefix(sender, "127.0.0.1:") {
		t.Errorf("sender shown as %q", sender)
	}
}
