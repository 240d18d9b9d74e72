package systemtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
	"github.com/relayhq/relay/systemtest/harness"
)

// storeBody sends body to a new inspector and returns the delivery's id
// once the history shows it.
func storeBody(t *testing.T, r *harness.Relay, body []byte) string {
	t.Helper()
	id, _ := createInspector(t, r)
	req, err := http.NewRequest(http.MethodPost, "http://"+r.AddressHost(id)+"/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r.Route(req))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var delivery string
	testwait.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var out struct {
			Inspector struct {
				Deliveries struct{ Nodes []struct{ ID string } }
			}
		}
		r.MustGraphQL(t, "", `query($id: ID!){ inspector(id: $id){ deliveries{ nodes{ id } } } }`, map[string]any{"id": id}, &out)
		if n := out.Inspector.Deliveries.Nodes; len(n) == 1 {
			delivery = n[0].ID
			return nil
		}
		return fmt.Errorf("inspector %s has no delivery yet", id)
	})
	return delivery
}

// aliasedBodies is the query that asks for one stored body n times.
func aliasedBodies(n int) string {
	var b strings.Builder
	b.WriteString("query($id: ID!){ ")
	for i := range n {
		b.WriteString("d" + strconv.Itoa(i) + ": delivery(id: $id){ body } ")
	}
	return b.String() + "}"
}

// TestAPIAnswersBounded: what an answer holds is bounded by its encoded
// size, not only by the cost of the query. One anonymous client stores a
// 256 KiB body in its own inspector and asks for it under 38 aliases
// (within the cost budget): a body of '<' comes back at its own size (not
// escaped to \u003c, six times larger), a body of control characters,
// which JSON must escape sixfold, is refused as ANSWER_TOO_LARGE, and
// twenty such requests left unread do not drive the relay's memory up.
func TestAPIAnswersBounded(t *testing.T) {
	r := harness.Start(t, t.TempDir())
	const size = 256 << 10
	angles := storeBody(t, r, bytes.Repeat([]byte("<"), size))
	controls := storeBody(t, r, bytes.Repeat([]byte{0x01}, size))

	res := r.GraphQL(t, "", aliasedBodies(38), map[string]any{"id": angles})
	if len(res.Errors) > 0 {
		t.Fatalf("38 aliases of a body of '<': %v", res.Errors)
	}
	if got, most := len(res.Data), 38*size+64<<10; got > most {
		t.Errorf("38 aliases of a 256 KiB body of '<' answered %d bytes, want at most %d (escaped as \\u003c?)", got, most)
	}
	if !bytes.Contains(res.Data, []byte(`"<<<<`)) {
		t.Errorf("the answer does not carry '<' as itself: %.80s", res.Data)
	}

	if code := r.ErrorCode(t, "", aliasedBodies(38), map[string]any{"id": controls}); code != "ANSWER_TOO_LARGE" {
		t.Errorf("38 aliases of a body of control characters: code %q, want ANSWER_TOO_LARGE", code)
	}

	// Twenty of them at once, none read: each is refused as it grows, and
	// the answers in progress stay within the process's budget.
	before := peakRSSKiB(t, r)
	q, err := json.Marshal(map[string]any{"query": aliasedBodies(38), "variables": map[string]any{"id": controls}})
	if err != nil {
		t.Fatal(err)
	}
	var wg, read sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	release := make(chan struct{})
	for range 20 {
		wg.Add(1)
		read.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r.Port), 10*time.Second)
			if err != nil {
				t.Error(err)
				read.Done()
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
			_, _ = conn.Write([]byte("POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(len(q)) + "\r\n\r\n" + string(q)))
			// Read only the status line: the rest stays unread in the
			// socket's buffers while the other requests run.
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err == nil && strings.HasPrefix(line, "HTTP/1.1 ") {
				mu.Lock()
				answered++
				mu.Unlock()
			}
			read.Done()
			<-release // hold the connection, its answer unread, until all have one
		}()
	}
	read.Wait()
	close(release)
	wg.Wait()
	if answered != 20 {
		t.Errorf("%d of 20 requests answered", answered)
	}
	grew := peakRSSKiB(t, r) - before
	t.Logf("peak RSS grew %d MiB under 20 unread requests", grew>>10)
	// Unbounded, each answer would hold 38 x 1.5 MiB of escaped text at
	// least twice over (about 115 MiB): 20 of them, over 2 GiB.
	if grew > 600<<10 {
		t.Errorf("peak RSS grew %d MiB under 20 unread requests, want under 600 MiB", grew>>10)
	}
}

// TestAPIAnswersBoundedOverWebSocket: a socket's operations are counted
// like HTTP answers: a result over the per-answer bound is an error for that
// operation, not a message of tens of MiB.
func TestAPIAnswersBoundedOverWebSocket(t *testing.T) {
	r := harness.Start(t, t.TempDir())
	controls := storeBody(t, r, bytes.Repeat([]byte{0x01}, 256<<10))
	sub := r.Subscribe(t, "", aliasedBodies(38), map[string]any{"id": controls})
	defer sub.Close()
	err := sub.Err(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "ANSWER_TOO_LARGE") {
		t.Fatalf("38 aliases of a body of control characters over a WebSocket: %v, want ANSWER_TOO_LARGE", err)
	}
}

// TestForwardsAreNotCountedAsAnswers: a forward pushed to an agent carries
// a body the ingress already admitted (against --proxy-body-budget, up to
// --max-body), so the answer bound does not apply to it: a 3 MiB body
// reaches the local process through a relay whose answers are capped at
// 1 MiB (3 MiB of heap for all of them).
func TestForwardsAreNotCountedAsAnswers(t *testing.T) {
	rig := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	}), false, "--max-api-answer", "1MiB", "--api-answer-budget", "3MiB")
	resp := rig.send(t, "POST", "/big", nil, bytes.Repeat([]byte("<"), 3<<20))
	if resp.Status != http.StatusOK || string(resp.Body) != strconv.Itoa(3<<20) {
		t.Fatalf("a 3 MiB forward through a relay with 1 MiB answers: %d %q", resp.Status, resp.Body)
	}
}
