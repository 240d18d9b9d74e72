package systemtest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/systemtest/harness"
)

// TestRetriesHoldBodiesWithinTheBudget: one account retries eight deliveries
// of 250 KiB 120 times at once, to a local process that takes every
// request and answers none. A retry holds its request until its outcome
// is recorded (up to --forward-timeout): the retries out hold their
// requests within the account's quarter of --proxy-body-budget 64MiB
// (16 MiB: at most 52 of these, each counted with commands.RetryHeadBytes),
// not 120 of them; the others are refused UNAVAILABLE at once, recording
// nothing. Once the local process answers, the budget is given back and a
// retry passes again.
func TestRetriesHoldBodiesWithinTheBudget(t *testing.T) {
	r := harness.Start(t, "", "--proxy-body-budget", "64MiB")
	acct := signUpTenant(t, r, "retries")
	local := newQueueTarget(t, always(200))
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "p", "mode": "PROXY", "target": "127.0.0.1:" + local.port})
	const size, retries = 250 << 10, 120
	var ids []string
	for i := range 8 {
		body := make([]byte, size)
		_, _ = rand.Read(body)
		path := fmt.Sprintf("/big/%d", i)
		if resp := send(t, r, ep.ID, "POST", path, nil, body); resp.Status != 503 {
			t.Fatalf("delivery without an agent answered %d, want 503 (recorded)", resp.Status)
		}
		ids = append(ids, deliveryAt(t, r, acct.Token, ep.ID, path).ID)
	}
	release := local.hold()
	defer release()
	startAgentFor(t, r, acct.Token, ep.ID, "127.0.0.1:"+local.port)
	before, err := harness.ProcRSSKiB(r.PID())
	if err != nil {
		t.Fatal(err)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: retries}, Timeout: 60 * time.Second}
	retry := func(id string) (code, message string, err error) {
		body, _ := json.Marshal(map[string]any{"query": `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, "variables": map[string]any{"id": id}})
		req, _ := http.NewRequest(http.MethodPost, r.BareURL()+"/graphql", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+acct.Token)
		resp, err := client.Do(r.Route(req))
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out harness.GQLResult
		if err := json.Unmarshal(raw, &out); err != nil {
			return "", "", fmt.Errorf("answered %s: %.200s", resp.Status, raw)
		}
		if len(out.Errors) > 0 {
			return out.Errors[0].Code(), out.Errors[0].Message, nil
		}
		return "", "", nil
	}
	var (
		wg       sync.WaitGroup
		refused  atomic.Int64
		answered atomic.Int64
		mu       sync.Mutex
		odd      []string
	)
	for i := range retries {
		wg.Go(func() {
			code, message, err := retry(ids[i%len(ids)])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				odd = append(odd, err.Error())
			case code == "UNAVAILABLE" && strings.Contains(message, "body budget"):
				refused.Add(1)
			case code != "":
				odd = append(odd, code+": "+message)
			default:
				answered.Add(1)
			}
		})
	}
	// Every retry is either held by the local process or refused.
	harness.Eventually(t, 20*time.Second, "every retry held or refused", func() bool {
		return int64(local.holding())+refused.Load() >= retries
	})
	time.Sleep(300 * time.Millisecond) // none more arrives
	held := local.holding()
	now, err := harness.ProcRSSKiB(r.PID())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d retries of 250 KiB at once: %d held by the local process, %d refused; the relay's RSS went from %d MiB to %d MiB (%+d MiB)",
		retries, held, refused.Load(), before>>10, now>>10, (now-before)>>10)
	most := (16 << 20) / (size + commands.RetryHeadBytes)
	if held == 0 || held > most {
		t.Fatalf("one account has %d retries of 250 KiB out at once, want some and at most %d (its quarter of --proxy-body-budget 64MiB)", held, most)
	}
	release()
	wg.Wait()
	if len(odd) > 0 {
		t.Fatalf("retries answered other than held or refused for the body budget: %q", odd)
	}
	if answered.Load() != int64(held) || answered.Load()+refused.Load() != retries {
		t.Fatalf("%d retries answered, %d refused, %d held: want the held ones answered and the rest refused", answered.Load(), refused.Load(), held)
	}
	// Their outcomes recorded, what they held is given back.
	if code, message, err := retry(ids[0]); err != nil || code != "" {
		t.Fatalf("a retry once the others were answered: %s %s %v", code, message, err)
	}
}
