package systemtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/sqlitedsn"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestAnsweredDeliveriesSurviveSIGKILL kills the server in the middle of a
// concurrent load: every request that was answered 204 must be in the
// history after a restart, because the append is durable before the answer.
func TestAnsweredDeliveriesSurviveSIGKILL(t *testing.T) {
	r := harness.Start(t, "", loadFlags...)
	loadThenStop(t, r, func() { r.Kill(t) })
}

// TestSIGTERMDrainsInFlightRequests stops the server gracefully under load:
// it exits 0 and loses no answered delivery.
func TestSIGTERMDrainsInFlightRequests(t *testing.T) {
	r := harness.Start(t, "", loadFlags...)
	loadThenStop(t, r, func() {
		r.Stop(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if code, err := r.ExitCode(ctx); err != nil || code != 0 {
			t.Errorf("exit after SIGTERM: code %d, %v\n%s", code, err, r.Output())
		}
	})
}

// loadFlags lift the per-address rate limit, the inspector quota and the
// account's rate and storage quota (on by default with open sign-up) for
// tests and benchmarks that load one address or account on purpose.
var loadFlags = []string{"--address-rate", "off", "--inspector-quota", "off", "--account-rate", "off", "--account-storage", "off"}

// loadThenStop runs a concurrent load on an inspector, stops the server with
// stop once the load is under way, restarts it, and checks that every
// request answered 204 is in the history.
func loadThenStop(t *testing.T, r *harness.Relay, stop func()) {
	t.Helper()
	id, _ := createInspector(t, r)
	answered := map[string]string{}
	loadUntilStopped(t, r, r.AddressHost(id), "/load", 204, answered, stop)

	r.Restart(t)
	// After the restart the views catch up with the log before serving.
	got := map[string]bool{}
	for _, d := range history(t, r, id, 500) {
		got[d.Path] = true
	}
	missing := 0
	for p := range answered {
		if !got[p] {
			missing++
			if missing < 5 {
				t.Errorf("answered 204 but not in history after restart: %s", p)
			}
		}
	}
	t.Logf("answered before the stop: %d; history after restart: %d rows", len(answered), len(got))
	if missing > 0 {
		t.Fatalf("%d answered deliveries lost", missing)
	}
}

// TestProxiedAnswersSurviveSIGKILL kills the server in the middle of a
// concurrent load on a PROXY Endpoint: every sender that got the local
// process's answer must find that delivery in the history after a restart,
// with the same status and body recorded, because the delivery and its
// answer are one durable commit before the sender is answered; and the
// log the kills left behind verifies.
func TestProxiedAnswersSurviveSIGKILL(t *testing.T) {
	local := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "answer to "+req.URL.Path)
	})
	rig := startProxyRig(t, local, true, append(loadFlags, "--account-api-cost", "off",
		"--max-query-cost", "100000000")...)
	r := rig.r
	host := r.AddressHost(rig.ep.ID)

	// Two kills: an answer given before its commit is lost only if the kill
	// falls in that window, so each kill is another chance to see one.
	answered := map[string]string{} // path: the body the sender got
	for round := range 2 {
		if round > 0 {
			r.Restart(t)
		}
		loadUntilStopped(t, r, host, fmt.Sprintf("/load/%d", round), 201, answered, func() { r.Kill(t) })
	}
	r.Restart(t)
	type row struct {
		Path           string
		ResponseStatus *int
		ResponseBody   *string
	}
	got := map[string]row{}
	var after any
	for {
		var out struct {
			Endpoint struct {
				Deliveries struct {
					Nodes    []row
					PageInfo struct {
						HasNextPage bool
						EndCursor   *string
					}
				}
			}
		}
		r.MustGraphQL(t, rig.acct.Token, `query($id: ID!, $after: String){ endpoint(id: $id){ deliveries(first: 100, after: $after){
			nodes{ path responseStatus responseBody } pageInfo{ hasNextPage endCursor } } } }`, map[string]any{"id": rig.ep.ID, "after": after}, &out)
		for _, d := range out.Endpoint.Deliveries.Nodes {
			got[d.Path] = d
		}
		p := out.Endpoint.Deliveries.PageInfo
		if !p.HasNextPage || p.EndCursor == nil {
			break
		}
		after = *p.EndCursor
	}
	lost := 0
	for path, body := range answered {
		d, ok := got[path]
		if ok && d.ResponseStatus != nil && *d.ResponseStatus == 201 && d.ResponseBody != nil && *d.ResponseBody == body {
			continue
		}
		lost++
		if lost <= 5 {
			t.Errorf("answered 201 %q, after the restart: found %v, %+v", body, ok, d)
		}
	}
	t.Logf("answered before the kills: %d; history after the last restart: %d rows (with those the relay answered itself while the agent reconnected)", len(answered), len(got))
	if lost > 0 {
		t.Fatalf("%d answered deliveries lost or without their answer", lost)
	}
	// The log the kills left behind verifies: its chain is whole.
	r.Stop(t)
	if out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify after the kills: exit %d\n%s", code, out)
	}
}

// TestAnsweredDeliveriesSurviveSIGKILLAfterTheWALStartsOver kills the
// server under a load of 32 KiB bodies once its log's writer has started the
// WAL over twice, so that the commits before the kill overwrote frames the
// checkpoints had copied: every request answered 204 must still be in the
// history after a restart, and the log must verify.
func TestAnsweredDeliveriesSurviveSIGKILLAfterTheWALStartsOver(t *testing.T) {
	r := harness.Start(t, "", append(loadFlags, "--log-level", "debug")...)
	id, _ := createInspector(t, r)
	random := make([]byte, 16<<10)
	_, _ = rand.Read(random)
	body := []byte(hex.EncodeToString(random)) // 32 KiB the log's compression cannot shrink
	startedOver := func() bool { return strings.Count(r.Output(), "wal copied: the writer starts it over") >= 2 }
	answered := map[string]string{}
	loadUntil(t, r, r.AddressHost(id), "/wal", 204, body, answered, nil, "the WAL started over twice", startedOver, func() { r.Kill(t) })

	r.Restart(t)
	got := map[string]bool{}
	var after any
	for pages := 0; ; pages++ {
		if pages == 1000 {
			t.Fatal("history still has pages after 1000")
		}
		var out struct {
			Inspector struct {
				Deliveries struct {
					Edges    []struct{ Node struct{ Path string } }
					PageInfo struct {
						HasNextPage bool
						EndCursor   *string
					}
				}
			}
		}
		r.MustGraphQL(t, "", `query($id: ID!, $after: String){ inspector(id: $id){ deliveries(first: 100, after: $after){
			edges{ node{ path } } pageInfo{ hasNextPage endCursor } } } }`, map[string]any{"id": id, "after": after}, &out)
		for _, e := range out.Inspector.Deliveries.Edges {
			got[e.Node.Path] = true
		}
		p := out.Inspector.Deliveries.PageInfo
		if !p.HasNextPage || p.EndCursor == nil {
			break
		}
		after = *p.EndCursor
	}
	lost := 0
	for path := range answered {
		if !got[path] {
			lost++
			if lost <= 5 {
				t.Errorf("answered 204 but not in history after the kill: %s", path)
			}
		}
	}
	t.Logf("answered before the kill: %d; history after the restart: %d rows", len(answered), len(got))
	if lost > 0 {
		t.Fatalf("%d answered deliveries lost", lost)
	}
	r.Stop(t)
	if out, code := harness.RunCLI(t, "events", "verify", "--data", r.Data); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("verify after the kill: exit %d\n%s", code, out)
	}
}

// loadUntilStopped sends a concurrent load of POSTs to host, at paths
// under prefix, until 300 more are answered want, then calls stop, and
// adds each path answered want, with the body its sender got, to answered.
func loadUntilStopped(t *testing.T, r *harness.Relay, host, prefix string, want int, answered map[string]string, stop func()) {
	t.Helper()
	var count atomic.Int64
	loadUntil(t, r, host, prefix, want, []byte(`{"n":1}`), answered, nil, "300 answered requests", func() bool { return count.Load() >= 300 }, stop, &count)
}

// loadUntil sends a concurrent load of POSTs of body to host, at paths
// under prefix, until ready (named what) holds, then calls stop, and adds
// each path answered want, with the body its sender got, to answered; tally
// (when not nil) counts every other status and keeps the longest wait for
// an answer. Each counter in counts is moved by every answer want.
func loadUntil(t *testing.T, r *harness.Relay, host, prefix string, want int, body []byte, answered map[string]string, tally *loadTally, what string, ready func() bool, stop func(), counts ...*atomic.Int64) {
	t.Helper()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		quit = make(chan struct{})
	)
	const workers, maxPerWorker = 16, 2000
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < maxPerWorker; i++ {
				select {
				case <-quit:
					return
				default:
				}
				path := fmt.Sprintf("%s/%d/%d", prefix, w, i)
				sent := time.Now()
				resp, err := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: path, Host: host, Body: body})
				if err != nil {
					return // the server is gone
				}
				if tally != nil {
					mu.Lock()
					tally.slowest = max(tally.slowest, time.Since(sent))
					if resp.Status != want {
						tally.other[resp.Status]++
					}
					mu.Unlock()
				}
				if resp.Status != want {
					continue
				}
				mu.Lock()
				answered[path] = string(resp.Body)
				mu.Unlock()
				for _, c := range counts {
					c.Add(1)
				}
			}
		}(w)
	}
	harness.Eventually(t, 60*time.Second, what, ready)
	stop()
	close(quit)
	wg.Wait()
}

// loadTally is what loadUntil saw besides the answers it wanted.
type loadTally struct {
	other   map[int]int // status: how many
	slowest time.Duration
}

// TestAPinnedLogRefusesNoDelivery: another process keeps an old snapshot
// of the log (a sqlite3 shell left in a transaction) while 16 senders post
// 32 KiB bodies, so the log's WAL cannot start over and grows past 64 MiB.
// Every delivery must still be answered 204, without waiting for that
// reader: a RESTART checkpoint there took the log's write lock and waited
// for it, up to the busy timeout (10 s), every half second. The relay
// warns that the WAL cannot start over.
func TestAPinnedLogRefusesNoDelivery(t *testing.T) {
	r := harness.Start(t, "", loadFlags...)
	id, _ := createInspector(t, r)
	// Frames the checkpointer has not copied yet: the reader's snapshot
	// then needs the WAL, as a reader's under load does.
	for i := range 20 {
		r.SendRaw(t, harness.RawRequest{Method: "POST", Target: fmt.Sprintf("/before/%d", i), Host: r.AddressHost(id), Body: []byte(`{}`)})
	}
	path := filepath.Join(r.Data, "events.db")
	reader, err := sql.Open("sqlite", sqlitedsn.Build(path, true, sqlitedsn.Full))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	pin, err := reader.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Rollback()
	var n int
	if err := pin.QueryRow(`SELECT COUNT(*) FROM events`).Scan(&n); err != nil { // takes the snapshot
		t.Fatal(err)
	}
	random := make([]byte, 16<<10)
	_, _ = rand.Read(random)
	body := []byte(hex.EncodeToString(random))
	grown := func() bool {
		fi, err := os.Stat(path + "-wal")
		return err == nil && fi.Size() > 80<<20
	}
	answered, tally := map[string]string{}, &loadTally{other: map[int]int{}}
	loadUntil(t, r, r.AddressHost(id), "/pinned", 204, body, answered, tally, "the WAL past 80 MiB", grown, func() {})
	t.Logf("%d answered 204 while a reader pinned the log, the slowest in %v; other answers %v", len(answered), tally.slowest, tally.other)
	if len(tally.other) > 0 {
		t.Errorf("answers other than 204 while a reader pinned the log: %v", tally.other)
	}
	// A wait for the reader lasts the busy timeout, 10 s; an answer under
	// this load, tens of milliseconds.
	if tally.slowest > 5*time.Second {
		t.Errorf("a sender waited %v for its answer while a reader pinned the log", tally.slowest)
	}
	harness.Eventually(t, 10*time.Second, "the warning that the WAL cannot start over", func() bool {
		return strings.Contains(r.Output(), "WAL cannot start over")
	})
	if err := pin.Rollback(); err != nil {
		t.Fatal(err)
	}
}
