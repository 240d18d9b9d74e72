package ingress

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// countingFeed is the views' feed counting the deliveries streams read.
type countingFeed struct {
	Feed
	reads atomic.Int64
}

func (f *countingFeed) Delivery(ctx context.Context, id string) (readmodel.Delivery, error) {
	f.reads.Add(1)
	return f.Feed.Delivery(ctx, id)
}

// TestSmeeReplaysAreAdmittedPerClient: a client that reconnects again and
// again with an old Last-Event-ID is replayed what it missed only as often
// as its rate admits; past it the stream stays open and says it waits,
// reading nothing from the log. Before, each of 40 reconnects read the 99
// deliveries it missed.
func TestSmeeReplaysAreAdmittedPerClient(t *testing.T) {
	feed := &countingFeed{}
	// A rate that does not refill within the test: exactly the burst is
	// admitted, so the figures do not depend on the machine's speed.
	const burst, reconnects, missed = 4, 40, ReplayMaxEvents - 1
	e := newEnvWith(t, Config{ReplayRate: ratelimit.Rate{N: 1, Per: time.Hour, Burst: burst}}, func(d *Deps) { d.Feed = feed })
	views, err := projections.Open(t.Context(), filepath.Join(t.TempDir(), "views.db"), e.store, projections.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { _ = views.Run(runCtx); close(ran) }()
	t.Cleanup(func() { stop(); <-ran; _ = views.Close() })
	feed.Feed = views.History

	const id = "insp1"
	e.addInspector(id, time.Hour)
	e.routes.set(Route{ID: id, Kind: domain.AddressInspector, Smee: true, LastActivityAt: e.clock.Now()})
	host := id + ".localhost"
	for i := range missed + 1 {
		if resp, _ := e.do(http.MethodPost, host, "/", http.Header{"Content-Type": {"application/json"}}, []byte(fmt.Sprintf(`{"n":%d}`, i))); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST %d: %d", i, resp.StatusCode)
		}
	}
	last, err := e.store.LastPosition(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := views.WaitFor(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	page, err := views.DeliverySummaries(t.Context(), id, missed+1, "")
	if err != nil || len(page.Items) != missed+1 {
		t.Fatalf("history: %d rows, %v", len(page.Items), err)
	}
	oldest := page.Items[len(page.Items)-1].Cursor

	replayed, waited := 0, 0
	for range reconnects {
		got, waits := readReplay(t, e.addr, host, oldest, missed)
		switch {
		case waits && got == 0:
			waited++
		case !waits && got == missed:
			replayed++
		default:
			t.Fatalf("a reconnect got %d of %d missed deliveries and then waited=%v", got, missed, waits)
		}
	}
	reads := feed.reads.Load()
	t.Logf("%d reconnects with Last-Event-ID from one client: %d replayed, %d waiting; %d deliveries read from the log", reconnects, replayed, waited, reads)
	if replayed != burst || reads > burst*missed {
		t.Errorf("%d reconnects: %d replayed and %d deliveries read, want %d replays and at most %d reads", reconnects, replayed, reads, burst, burst*missed)
	}
	// Another client is admitted on its own.
	if got, waits := readReplayFrom(t, "127.0.0.2", e.addr, host, oldest, missed); waits || got != missed {
		t.Errorf("another client's replay: %d of %d, waits=%v", got, missed, waits)
	}
}

// readReplay reads a stream's events after ready until it has n messages
// or the comment that its replay waits; it reports the messages read and
// whether it waits.
func readReplay(t *testing.T, addr, host, lastID string, n int) (got int, waits bool) {
	t.Helper()
	return readReplayFrom(t, "127.0.0.1", addr, host, lastID, n)
}

// readReplayFrom is readReplay from the local address from.
func readReplayFrom(t *testing.T, from, addr, host, lastID string, n int) (got int, waits bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET / HTTP/1.1\r\nHost: " + host + "\r\nAccept: text/event-stream\r\nLast-Event-ID: " + lastID + "\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("open stream: %v %v", err, resp)
	}
	body := bufio.NewReader(resp.Body)
	for got < n {
		line, err := body.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		switch {
		case line == strings.TrimSuffix(replayWaitComment, "\n"):
			return got, true
		case strings.HasPrefix(line, "event: message"):
			got++
		}
	}
	return got, false
}
