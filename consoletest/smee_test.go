package consoletest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The home page's smee switch creates a smee-compatible inspector: its page
// shows the .env line, and its address serves smee's stream. Without the
// switch the page shows no such line.
func TestSmeeSwitch(t *testing.T) {
	p := newPage(t, 1280, 800)
	p.open("/")
	p.assertLabelled()
	p.click(`[data-testid=new-inspector-smee]`)
	p.click(`[data-testid=new-inspector]`)
	p.waitFor("the inspector page", `/^\/i\/[^/]+$/.test(location.pathname)`)
	id := strings.TrimPrefix(eval[string](p, `location.pathname`), "/i/")
	p.waitFor("the .env line", `!!document.querySelector('[data-testid=smee-env]')`)
	want := fmt.Sprintf("WEBHOOK_PROXY_URL=http://%s.localhost:%d", id, srv.Port)
	if got := p.text(`[data-testid=smee-env]`); got != want {
		t.Errorf(".env line %q, want %q", got, want)
	}
	if got := streamStatus(t, id); got != "200 text/event-stream" {
		t.Errorf("stream request on the smee inspector: %s", got)
	}

	p.open("/")
	p.click(`[data-testid=new-inspector]`)
	p.waitFor("another inspector page", fmt.Sprintf(`/^\/i\/[^/]+$/.test(location.pathname) && location.pathname !== %q`, "/i/"+id))
	p.waitLive()
	if n := eval[int](p, `document.querySelectorAll('[data-testid=smee-env]').length`); n != 0 {
		t.Errorf("a plain inspector's page shows the .env line")
	}
}

// streamStatus asks the address for smee's stream and returns the status
// and content type of the answer.
func streamStatus(t *testing.T, id string) string {
	t.Helper()
	conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(srv.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", srv.AddressHost(id))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(resp.StatusCode) + " " + resp.Header.Get("Content-Type")
}
