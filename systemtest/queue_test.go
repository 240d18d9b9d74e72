package systemtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// queueTarget is a local process that records each request it got (with
// its Relay-Delivery-Id and when) and answers what answer says for the
// n-th time it sees that delivery id (1-based).
type queueTarget struct {
	mu     sync.Mutex
	seen   []queueSeen
	tries  map[string]int
	answer func(id string, n int) int
	delay  time.Duration
	// gate, when set, holds each request until it is closed; held counts
	// the requests it holds.
	gate chan struct{}
	held int
	port string
}

type queueSeen struct {
	ID, Path string
	At       time.Time
	Status   int
}

func newQueueTarget(t *testing.T, answer func(id string, n int) int) *queueTarget {
	t.Helper()
	q := &queueTarget{tries: map[string]int{}, answer: answer}
	target := localTarget(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		id := r.Header.Get("Relay-Delivery-Id")
		q.mu.Lock()
		q.tries[id]++
		status := q.answer(id, q.tries[id])
		q.seen = append(q.seen, queueSeen{ID: id, Path: r.RequestURI, At: time.Now(), Status: status})
		delay, gate := q.delay, q.gate
		if gate != nil {
			q.held++
		}
		q.mu.Unlock()
		time.Sleep(delay)
		if gate != nil {
			<-gate
		}
		w.WriteHeader(status)
	}))
	_, q.port, _ = strings.Cut(target, ":")
	return q
}

// hold makes the local process keep the requests that arrive from now on
// unanswered; it returns what lets them go.
func (q *queueTarget) hold() (release func()) {
	gate := make(chan struct{})
	q.mu.Lock()
	q.gate, q.held = gate, 0
	q.mu.Unlock()
	return sync.OnceFunc(func() {
		q.mu.Lock()
		q.gate = nil
		q.mu.Unlock()
		close(gate)
	})
}

// holding counts the requests the local process holds unanswered.
func (q *queueTarget) holding() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held
}

func (q *queueTarget) all() []queueSeen {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]queueSeen(nil), q.seen...)
}

// delivered counts the distinct deliveries answered 2xx.
func (q *queueTarget) delivered() int {
	n := map[string]bool{}
	for _, s := range q.all() {
		if s.Status < 300 {
			n[s.ID] = true
		}
	}
	return len(n)
}

func always(status int) func(string, int) int { return func(string, int) int { return status } }

// queueAnswer is the JSON a QUEUE Endpoint answers by default.
type queueAnswer struct {
	Queued   bool
	Delivery string
}

// sendQueued sends n deliveries in order and checks each was answered
// 202 at once with the delivery's id; it returns the ids in order.
func sendQueued(t *testing.T, r *harness.Relay, endpointID string, n int, prefix string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	for i := range n {
		resp := send(t, r, endpointID, "POST", fmt.Sprintf("%s/%d", prefix, i), [][2]string{{"Content-Type", "application/json"}}, []byte(`{"n":1}`))
		var a queueAnswer
		if resp.Status != 202 || json.Unmarshal(resp.Body, &a) != nil || !a.Queued || a.Delivery == "" {
			t.Fatalf("delivery %d answered %d %q, want 202 {\"queued\":true,\"delivery\":ID}", i, resp.Status, resp.Body)
		}
		ids = append(ids, a.Delivery)
	}
	return ids
}

// queueEntry is Delivery.queue.
type queueEntry struct {
	State              string
	Tries              int
	Failures           int
	Reason             string
	PossibleDuplicates int
	DeliveredStatus    *int
}

func deliveryQueue(t *testing.T, r *harness.Relay, token, id string) *queueEntry {
	t.Helper()
	var out struct{ Delivery *struct{ Queue *queueEntry } }
	r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ queue{ state tries failures reason possibleDuplicates deliveredStatus } } }`,
		map[string]any{"id": id}, &out)
	if out.Delivery == nil {
		t.Fatalf("delivery %s not found", id)
	}
	return out.Delivery.Queue
}

// TestQueueAnswersAtOnceThenDrainsInOrder: 200 deliveries to a strict
// QUEUE Endpoint with no listener are all answered 202 at once; once
// `relay listen` connects, the local process gets each once, in receipt
// order, with its Relay-Delivery-Id; the Endpoint stays in QUEUE mode.
func TestQueueAnswersAtOnceThenDrainsInOrder(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", loadFlags...)
	h, acct := loggedInHome(t, r)
	local := newQueueTarget(t, always(200))
	out, code := h.run(t, "", "endpoints", "create", "orders", "--mode", "queue", "--ordering", "strict", "--rate", "1000", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoints create: exit %d\n%s", code, out)
	}
	var ep endpointInfo
	if err := json.Unmarshal([]byte(out), &ep); err != nil || ep.Mode != "QUEUE" {
		t.Fatalf("created %q (%v), want a QUEUE Endpoint", out, err)
	}
	const n = 200
	ids := sendQueued(t, r, ep.ID, n, "/order")
	if got := len(local.all()); got != 0 {
		t.Fatalf("the local process got %d requests with no listener", got)
	}
	// The history follows the log within the views' linger: the last 202
	// may come a moment before its row.
	testwait.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if out, code := h.run(t, "", "deliveries", "list", "orders", "--status", "queued", "--limit", "1000"); code != 0 || strings.Count(out, "waiting for a listener") != n {
			return fmt.Errorf("deliveries list --status queued: exit %d, want %d waiting\n%s", code, n, out)
		}
		return nil
	})

	listen := h.startIn(t, t.TempDir(), "listen", local.port, "orders")
	waitOutput(t, listen, regexp.MustCompile(`QUEUE mode`))
	harness.Eventually(t, 60*time.Second, "every queued delivery delivered", func() bool { return local.delivered() == n })
	seen := local.all()
	if len(seen) != n {
		t.Fatalf("the local process got %d requests, want %d (each once)", len(seen), n)
	}
	for i, s := range seen {
		if s.ID != ids[i] || s.Path != fmt.Sprintf("/order/%d", i) {
			t.Fatalf("request %d was %s %s, want %s /order/%d: not in receipt order", i, s.ID, s.Path, ids[i], i)
		}
	}
	if e := endpointByID(t, r, acct.Token, ep.ID); e == nil || e.Mode != "QUEUE" {
		t.Fatalf("after relay listen the Endpoint is %+v, want QUEUE mode kept", e)
	}
	harness.Eventually(t, 10*time.Second, "the last delivery marked delivered", func() bool {
		q := deliveryQueue(t, r, acct.Token, ids[n-1])
		return q != nil && q.State == "delivered" && q.DeliveredStatus != nil && *q.DeliveredStatus == 200
	})
	if out, code := h.run(t, "", "deliveries", "list", "orders", "--status", "queued"); code != 0 || !strings.Contains(out, "no queued deliveries") {
		t.Fatalf("after the drain: exit %d\n%s", code, out)
	}
}

// TestQueueRetriesWithBackoff: a local process that fails the first two
// tries of each delivery (500) gets each a third time and answers it; the
// tries are spaced by at least the backoff (base, then twice the base),
// and the log and the API tell each failure and its schedule.
func TestQueueRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", loadFlags...)
	h, acct := loggedInHome(t, r)
	local := newQueueTarget(t, func(_ string, n int) int {
		if n <= 2 {
			return 500
		}
		return 200
	})
	const base = 300 * time.Millisecond
	out, code := h.run(t, "", "endpoints", "create", "retrying", "--mode", "queue", "--backoff-base", "300ms", "--backoff-cap", "2s", "--max-attempts", "5", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoints create: exit %d\n%s", code, out)
	}
	var ep endpointInfo
	if err := json.Unmarshal([]byte(out), &ep); err != nil {
		t.Fatal(err)
	}
	h.startIn(t, t.TempDir(), "listen", local.port, "retrying")
	waitAgent(t, r, acct.Token, ep.ID, true)
	const n = 5
	ids := sendQueued(t, r, ep.ID, n, "/retry")
	harness.Eventually(t, 60*time.Second, "each delivery answered on its third try", func() bool { return local.delivered() == n })
	byID := map[string][]queueSeen{}
	for _, s := range local.all() {
		byID[s.ID] = append(byID[s.ID], s)
	}
	for _, id := range ids {
		tries := byID[id]
		if len(tries) != 3 || tries[0].Status != 500 || tries[1].Status != 500 || tries[2].Status != 200 {
			t.Fatalf("delivery %s: tries %+v, want 500, 500, 200", id, tries)
		}
		if gap := tries[1].At.Sub(tries[0].At); gap < base {
			t.Errorf("delivery %s: second try %s after the first, want at least the base %s", id, gap, base)
		}
		if gap := tries[2].At.Sub(tries[1].At); gap < 2*base {
			t.Errorf("delivery %s: third try %s after the second, want at least twice the base %s", id, gap, 2*base)
		}
	}
	harness.Eventually(t, 10*time.Second, "the queue view to show the delivery", func() bool {
		q := deliveryQueue(t, r, acct.Token, ids[0])
		return q != nil && q.State == "delivered"
	})
	q := deliveryQueue(t, r, acct.Token, ids[0])
	if q.Tries != 3 || q.Failures != 2 || *q.DeliveredStatus != 200 {
		t.Fatalf("Delivery.queue %+v, want 3 tries, 2 failures, delivered 200", q)
	}
	types := streamTypes(logEvents(t, r, acct.Token), "delivery-"+ids[0])
	want := "delivery.received.v1 forward.requested.v1 forward.responded.v1 delivery.retry_scheduled.v1 " +
		"forward.requested.v1 forward.responded.v1 delivery.retry_scheduled.v1 forward.requested.v1 forward.responded.v1 delivery.delivered.v1"
	if strings.Join(types, " ") != want {
		t.Fatalf("delivery stream:\n%s\nwant\n%s", strings.Join(types, " "), want)
	}
	shown, code := h.run(t, "", "deliveries", "explain", ids[0])
	if code != 0 || !strings.Contains(shown, "queue: delivered on attempt 3 (200)") {
		t.Fatalf("deliveries explain: exit %d\n%s", code, shown)
	}
	// The queue sent each attempt, and they say so: no user asked for a retry.
	for _, want := range []string{"Forward requested (attempt 1, from the queue)", "Forward requested (attempt 3, from the queue)",
		" ms (attempt 2, from the queue), reported by agent"} {
		if !strings.Contains(shown, want) {
			t.Errorf("deliveries explain lacks %q:\n%s", want, shown)
		}
	}
	if strings.Contains(shown, "a retry") || strings.Contains(shown, "duplicate") {
		t.Errorf("deliveries explain names a queued attempt a retry or a duplicate:\n%s", shown)
	}
	shown, code = h.run(t, "", "deliveries", "show", ids[0])
	if code != 0 || strings.Count(shown, "(from the queue)") != 3 || strings.Contains(shown, "duplicate") {
		t.Errorf("deliveries show: exit %d, want each of 3 attempts from the queue\n%s", code, shown)
	}
}

// queuedAttempts is what the API says of each attempt of a delivery: its
// error and whether the queue sent it as a possible duplicate.
func queuedAttempts(t *testing.T, r *harness.Relay, token, id string) []struct {
	Error             *string
	Queued            bool
	PossibleDuplicate bool
} {
	t.Helper()
	var out struct {
		Delivery *struct {
			Attempts []struct {
				Error             *string
				Queued            bool
				PossibleDuplicate bool
			}
		}
	}
	r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ attempts{ error queued possibleDuplicate } } }`, map[string]any{"id": id}, &out)
	if out.Delivery == nil {
		t.Fatalf("delivery %s not found", id)
	}
	return out.Delivery.Attempts
}

// TestQueueDeadAndRedrive: deliveries that fail past the policy's attempts
// are dead with the reason; one command puts them back and they are
// delivered. Bad policy input is refused with exit 2 / INVALID_INPUT.
func TestQueueDeadAndRedrive(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", loadFlags...)
	h, acct := loggedInHome(t, r)
	var mu sync.Mutex
	status := 503
	local := newQueueTarget(t, func(string, int) int { mu.Lock(); defer mu.Unlock(); return status })
	out, code := h.run(t, "", "endpoints", "create", "fragile", "--mode", "queue", "--backoff-base", "100ms", "--max-attempts", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoints create: exit %d\n%s", code, out)
	}
	var ep endpointInfo
	if err := json.Unmarshal([]byte(out), &ep); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{
		{"--max-attempts", "0"},
		{"--max-attempts", "101"},
		{"--backoff-base", "-1s"},
		{"--backoff-base", "2s", "--backoff-cap", "1s"},
		{"--retry-on", "5xx,teapot"},
		{"--ordering", "sideways"},
		{"--max-in-flight", "0"},
		{"--rate", "1001"},
		{"--max-age", "10s"},
	} {
		if out, code := h.run(t, "", append([]string{"endpoints", "update", "fragile"}, bad...)...); code != 2 {
			t.Errorf("endpoints update %v: exit %d, want 2\n%s", bad, code, out)
		}
	}
	for _, in := range []map[string]any{{"maxAttempts": 0}, {"backoffBase": "-1s"}, {"retryOn": []string{"teapot"}}, {"backoffBase": "2s", "backoffCap": "1s"}} {
		if code := r.ErrorCode(t, acct.Token, `mutation($id: ID!, $q: QueuePolicyInput){ updateEndpoint(id: $id, input: {queue: $q}){ id } }`,
			map[string]any{"id": ep.ID, "q": in}); code != "INVALID_INPUT" {
			t.Errorf("updateEndpoint queue %v: %q, want INVALID_INPUT", in, code)
		}
	}

	h.startIn(t, t.TempDir(), "listen", local.port, "fragile")
	waitAgent(t, r, acct.Token, ep.ID, true)
	ids := sendQueued(t, r, ep.ID, 3, "/fragile")
	var listed string
	harness.Eventually(t, 30*time.Second, "three dead deliveries", func() bool {
		listed, _ = h.run(t, "", "deliveries", "list", "fragile", "--status", "dead")
		return strings.Count(listed, "dead after 2 attempts: last 503") == 3
	})
	if n := len(local.all()); n != 6 {
		t.Fatalf("the local process got %d requests, want 2 for each of 3", n)
	}
	q := deliveryQueue(t, r, acct.Token, ids[0])
	if q == nil || q.State != "dead" || q.Failures != 2 {
		t.Fatalf("Delivery.queue %+v, want dead after 2 failures", q)
	}
	mu.Lock()
	status = 200
	mu.Unlock()
	if out, code := h.run(t, "", "retry", "--all", "--dead", "fragile"); code != 0 || !strings.Contains(out, "3 dead deliveries of fragile back in its queue") {
		t.Fatalf("retry --all --dead: exit %d\n%s", code, out)
	}
	harness.Eventually(t, 30*time.Second, "the redriven deliveries delivered", func() bool { return local.delivered() == 3 })
	if out, code := h.run(t, "", "retry", "--dead", "fragile"); code != 2 {
		t.Fatalf("retry --dead without --all: exit %d, want 2\n%s", code, out)
	}

	// A failure with its next attempt an hour away: the list, the API and
	// the explanation say which attempt failed, how, and when the next is.
	mu.Lock()
	status = 500
	mu.Unlock()
	if out, code := h.run(t, "", "endpoints", "update", "fragile", "--backoff-base", "1h", "--backoff-cap", "2h", "--max-attempts", "3"); code != 0 ||
		!strings.Contains(out, "retries 5xx,timeout from 1h to 2h, 3 attempts") {
		t.Fatalf("endpoints update: exit %d\n%s", code, out)
	}
	time.Sleep(1100 * time.Millisecond) // the driver reads an Endpoint's settings again after a second
	slow := sendQueued(t, r, ep.ID, 1, "/slow")[0]
	nextAt := regexp.MustCompile(`attempt 1 failed 500, next at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`)
	harness.Eventually(t, 30*time.Second, "the failed attempt listed with its next time", func() bool {
		listed, _ = h.run(t, "", "deliveries", "list", "fragile", "--status", "queued")
		return nextAt.MatchString(listed)
	})
	shown, code := h.run(t, "", "deliveries", "explain", slow)
	if code != 0 || !regexp.MustCompile(`queue: attempt 1 failed 500, next at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d`).MatchString(shown) {
		t.Fatalf("deliveries explain: exit %d\n%s", code, shown)
	}
}

// TestQueueSurvivesKill: the relay is killed (SIGKILL) in the middle of
// draining a backlog of 1000 queued deliveries; after a restart every one
// reaches the local process, and each it got more than once was sent again
// marked a possible duplicate.
func TestQueueSurvivesKill(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", loadFlags...)
	h, acct := loggedInHome(t, r)
	local := newQueueTarget(t, always(200))
	local.delay = 20 * time.Millisecond // so the backlog is still draining when the hold below begins
	out, code := h.run(t, "", "endpoints", "create", "backlog", "--mode", "queue", "--rate", "200", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoints create: exit %d\n%s", code, out)
	}
	var ep endpointInfo
	if err := json.Unmarshal([]byte(out), &ep); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	var (
		wg  sync.WaitGroup
		all = make([][]string, 8)
	)
	for w := range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); all[w] = sendQueued(t, r, ep.ID, n/8, fmt.Sprintf("/b%d", w)) }()
	}
	wg.Wait()
	listen := h.startIn(t, t.TempDir(), "listen", local.port, "backlog")
	harness.Eventually(t, 60*time.Second, "a part of the backlog delivered", func() bool { return local.delivered() >= n/4 })
	// The kill must find an attempt open: one the log holds as sent (the
	// queue records an attempt before it sends it) whose answer is not in.
	// The local process holds what arrives until the relay is killed; left
	// to timing, a loaded machine could kill it between attempts.
	release := local.hold()
	defer release()
	harness.Eventually(t, 30*time.Second, "a request held at the local process", func() bool { return local.holding() > 0 })
	r.Kill(t)
	release()
	before := local.delivered()
	r.RestartSamePort(t)
	harness.Eventually(t, 120*time.Second, "the whole backlog delivered after the restart", func() bool { return local.delivered() == n })
	listen.Stop(t)
	if before >= n {
		t.Fatalf("the backlog was drained before the kill (%d): the test shows nothing", before)
	}
	counts := map[string]int{}
	for _, s := range local.all() {
		counts[s.ID]++
	}
	twice := 0
	for _, ids := range all {
		for _, id := range ids {
			if counts[id] == 0 {
				t.Fatalf("delivery %s never reached the local process", id)
			}
			if counts[id] > 1 {
				twice++
				q := deliveryQueue(t, r, acct.Token, id)
				if q == nil || q.PossibleDuplicates == 0 {
					t.Errorf("delivery %s reached the local process %d times but its queue says %+v: not marked a possible duplicate", id, counts[id], q)
				}
				if twice == 1 {
					checkDuplicateLabelled(t, h, r, acct.Token, id)
				}
			}
		}
	}
	if twice == 0 {
		t.Fatalf("no delivery reached the local process twice: the kill found no attempt open, and the test shows nothing of duplicates")
	}
	t.Logf("%d delivered before the kill; %d requests in all for %d deliveries, %d sent again marked possible duplicates", before, len(local.all()), n, twice)
}

// checkDuplicateLabelled: a delivery the queue sent again after the kill
// left an attempt open has, among its attempts, the one left open (failed
// at the restart) and, after it, one marked a possible duplicate; the API,
// `deliveries show` and `deliveries explain` say which.
func checkDuplicateLabelled(t *testing.T, h cliHome, r *harness.Relay, token, id string) {
	t.Helper()
	attempts := queuedAttempts(t, r, token, id)
	open, dup := -1, -1
	for i, a := range attempts {
		if !a.Queued {
			t.Errorf("delivery %s: attempt %d not marked queued: %+v", id, i+1, attempts)
		}
		if a.Error != nil && *a.Error == "relay restarted before the local answer" && open < 0 {
			open = i
		}
		if a.PossibleDuplicate && dup < 0 {
			dup = i
		}
	}
	if open < 0 || dup <= open {
		t.Fatalf("delivery %s: attempts %+v, want one left open by the kill and a possible duplicate after it", id, attempts)
	}
	shown, code := h.run(t, "", "deliveries", "show", id)
	if code != 0 || !strings.Contains(shown, fmt.Sprintf("  %d: ", dup+1)) ||
		!strings.Contains(shown, "(from the queue, a possible duplicate: an earlier attempt was left open)") {
		t.Errorf("deliveries show: exit %d, want attempt %d labelled a possible duplicate\n%s", code, dup+1, shown)
	}
	shown, code = h.run(t, "", "deliveries", "explain", id)
	want := fmt.Sprintf("Forward requested (attempt %d, from the queue, a possible duplicate)", dup+1)
	if code != 0 || !strings.Contains(shown, want) || !strings.Contains(shown, fmt.Sprintf("attempt %d was left open when the relay stopped", open+1)) {
		t.Errorf("deliveries explain: exit %d, want %q and why\n%s", code, want, shown)
	}
}

// TestQueueBounds: past --queue-backlog a QUEUE Endpoint's sender gets 503
// with Retry-After (recorded with the reason); a body past the capture cap
// cannot be kept whole to forward later and is refused 413.
func TestQueueBounds(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", append(loadFlags, "--queue-backlog", "5", "--capture-cap", "1024", "--max-headers", "10")...)
	acct := signUpTenant(t, r, "bounds")
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "small", "mode": "QUEUE"})
	sendQueued(t, r, ep.ID, 5, "/fill")
	var refused harness.Response
	accepted := 5
	harness.Eventually(t, 15*time.Second, "a sender refused with the backlog full", func() bool {
		refused = send(t, r, ep.ID, "POST", "/more", nil, []byte(`{}`))
		if refused.Status == 202 {
			accepted++
		}
		return refused.Status == 503
	})
	if refused.Header.Get("Retry-After") == "" || !strings.Contains(string(refused.Body), "queue is full") {
		t.Fatalf("refusal %d %v %q, want 503 with Retry-After naming the full queue", refused.Status, refused.Header, refused.Body)
	}
	if again := send(t, r, ep.ID, "POST", "/more", nil, []byte(`{}`)); again.Status != 503 {
		t.Fatalf("the next sender got %d with the backlog full, want 503", again.Status)
	}
	var out struct {
		Endpoint struct{ Queue struct{ Queued int } }
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ queue{ queued } } }`, map[string]any{"id": ep.ID}, &out)
	if out.Endpoint.Queue.Queued != accepted {
		t.Fatalf("queue holds %d, want the %d accepted", out.Endpoint.Queue.Queued, accepted)
	}
	// Another account sees nothing of the queue and cannot redrive it.
	other := signUpTenant(t, r, "other")
	if code := r.ErrorCode(t, other.Token, `mutation($ep: ID!){ redriveDead(endpoint: $ep) }`, map[string]any{"ep": ep.ID}); code != "NOT_FOUND" {
		t.Errorf("another account's redriveDead: %q, want NOT_FOUND", code)
	}
	if code := r.ErrorCode(t, other.Token, `mutation($ep: ID!){ redriveDeadPage(endpoint: $ep){ redriven } }`, map[string]any{"ep": ep.ID}); code != "NOT_FOUND" {
		t.Errorf("another account's redriveDeadPage: %q, want NOT_FOUND", code)
	}
	if code := r.ErrorCode(t, other.Token, `query($ep: ID!){ queuedDeliveries(endpoint: $ep){ delivery{ id } } }`, map[string]any{"ep": ep.ID}); code != "NOT_FOUND" {
		t.Errorf("another account's queuedDeliveries: %q, want NOT_FOUND", code)
	}
	big := send(t, r, ep.ID, "POST", "/big", nil, []byte(strings.Repeat("x", 2048)))
	if big.Status != 413 {
		t.Fatalf("a body past the capture cap got %d, want 413", big.Status)
	}
	var many [][2]string
	for i := range 12 {
		many = append(many, [2]string{fmt.Sprintf("X-H%d", i), "v"})
	}
	if resp := send(t, r, ep.ID, "POST", "/headers", many, []byte(`{}`)); resp.Status != 431 {
		t.Fatalf("headers past --max-headers got %d, want 431", resp.Status)
	}
}

// TestQueueFiltersAndCopies: filters apply as in PROXY mode: a delivery
// the Endpoint's filters refuse, or that no connected listener's filters
// take, is answered as a LOG Endpoint answers and never queued; one they
// take is queued, delivered to the primary listener, and a copy goes to
// the other listener.
func TestQueueFiltersAndCopies(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", loadFlags...)
	h, acct := loggedInHome(t, r)
	primary := newQueueTarget(t, always(200))
	copyTo := newQueueTarget(t, always(200))
	out, code := h.run(t, "", "endpoints", "create", "picky", "--mode", "queue", "--filter", "method=POST", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoints create: exit %d\n%s", code, out)
	}
	var ep endpointInfo
	if err := json.Unmarshal([]byte(out), &ep); err != nil {
		t.Fatal(err)
	}
	la := h.startIn(t, t.TempDir(), "listen", primary.port, "picky", "--filter", "path=/keep/*")
	waitOutput(t, la, regexp.MustCompile(`QUEUE mode`))
	lb := h.startIn(t, t.TempDir(), "listen", copyTo.port, "picky", "--filter", "path=/keep/*")
	waitOutput(t, lb, regexp.MustCompile(`receives copies`))

	if resp := send(t, r, ep.ID, "GET", "/keep/0", nil, nil); resp.Status != 204 {
		t.Fatalf("a GET the Endpoint's filter refuses: %d, want 204 as LOG answers", resp.Status)
	}
	if resp := send(t, r, ep.ID, "POST", "/drop", nil, []byte(`{}`)); resp.Status != 204 {
		t.Fatalf("a POST no listener takes: %d, want 204 as LOG answers", resp.Status)
	}
	id := sendQueued(t, r, ep.ID, 1, "/keep")[0]
	harness.Eventually(t, 30*time.Second, "the primary and the copy listener to get it", func() bool {
		return primary.delivered() == 1 && copyTo.delivered() == 1
	})
	harness.Eventually(t, 10*time.Second, "the delivery marked delivered", func() bool {
		q := deliveryQueue(t, r, acct.Token, id)
		return q != nil && q.State == "delivered"
	})
	for _, s := range append(primary.all(), copyTo.all()...) {
		if s.Path != "/keep/0" || s.ID != id {
			t.Fatalf("a local process got %s %s, want only %s /keep/0", s.ID, s.Path, id)
		}
	}
	var list struct {
		Endpoint struct {
			Queue struct{ Queued, InFlight, Dead int }
		}
	}
	r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ queue{ queued inFlight dead } } }`, map[string]any{"id": ep.ID}, &list)
	if q := list.Endpoint.Queue; q.Queued+q.InFlight+q.Dead != 0 {
		t.Fatalf("queue %+v after the only queued delivery was delivered: a filtered one was queued", q)
	}
}

// TestQueuePageAndRedriveBounds exceeds the per-call bounds of an
// Endpoint's queue: 1 001 dead deliveries are listed 1 000 at most per
// page however many are asked for, and relay retry --all --dead puts them
// all back in pages of 1 000, each once.
func TestQueuePageAndRedriveBounds(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "", loadFlags...)
	h, acct := loggedInHome(t, r)
	// No listener counts as a failure and one failure is death: every
	// delivery dies at its first check.
	out, code := h.run(t, "", "endpoints", "create", "dying", "--mode", "queue", "--retry-on", "no-listener",
		"--max-attempts", "1", "--rate", "1000", "--max-in-flight", "100", "-o", "json")
	if code != 0 {
		t.Fatalf("endpoints create exited %d:\n%s", code, out)
	}
	var ep struct{ ID string }
	if err := json.Unmarshal([]byte(out), &ep); err != nil {
		t.Fatal(err)
	}
	const n = 1001
	sendQueued(t, r, ep.ID, n, "/d")
	dead := func() int {
		var q struct {
			Endpoint struct{ Queue struct{ Dead int } }
		}
		r.MustGraphQL(t, acct.Token, `query($id: ID!){ endpoint(id: $id){ queue{ dead } } }`, map[string]any{"id": ep.ID}, &q)
		return q.Endpoint.Queue.Dead
	}
	harness.Eventually(t, 90*time.Second, "all dead", func() bool { return dead() == n })

	var page struct {
		QueuedDeliveries []struct{ Delivery struct{ ID string } }
	}
	r.MustGraphQL(t, acct.Token, `query($ep: ID!){ queuedDeliveries(endpoint: $ep, state: "dead", first: 5000){ delivery{ id } } }`,
		map[string]any{"ep": ep.ID}, &page)
	if len(page.QueuedDeliveries) != 1000 {
		t.Errorf("a page asked for 5000 holds %d, want the bound 1000", len(page.QueuedDeliveries))
	}
	// A cursor the API did not give is refused, and nothing is put back.
	if code := r.ErrorCode(t, acct.Token, `mutation($ep: ID!){ redriveDeadPage(endpoint: $ep, after: "x"){ redriven } }`, map[string]any{"ep": ep.ID}); code != "INVALID_INPUT" {
		t.Fatalf("redriveDeadPage with a bad cursor: %q, want INVALID_INPUT", code)
	}
	// One run puts every dead delivery back, page by page. Each dies again
	// at once (no listener), so those of the first page may be dead again
	// when the second is put back: going on after the first page's cursor,
	// the run puts none of them back twice (a second time would count
	// more than n).
	if out, code := h.run(t, "", "retry", "--all", "--dead", "dying"); code != 0 || !strings.Contains(out, fmt.Sprintf("%d dead deliveries of dying back in its queue\n", n)) {
		t.Fatalf("retry --all --dead exited %d, want all %d put back, each once:\n%s", code, n, out)
	}
	harness.Eventually(t, 90*time.Second, "all dead again", func() bool { return dead() == n })
}
