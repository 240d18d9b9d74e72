package systemtest

// BenchmarkNoisyNeighbour: one account fills its storage quota with
// 256 KiB bodies as fast as the relay takes them, then keeps sending,
// while a second account ingests and reads its history at a steady rate.
// It reports what the second account saw before and during the flood
// (docs/benchmarks.md has the command and the figures).

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/systemtest/harness"
)

const (
	neighbourQuota  = "128MiB"
	neighbourBody   = 256 << 10
	neighbourQuiet  = 5 * time.Second  // the quiet account alone
	neighbourNoisy  = 10 * time.Second // both at once
	neighbourSender = 8                // the noisy account's concurrent senders
)

func BenchmarkNoisyNeighbour(b *testing.B) {
	// No address or account rate: the noisy account is held by its
	// storage quota alone.
	r := harness.Start(b, "", "--log-level", "error", "--admin-token", quotaAdmin, "--address-rate", "off", "--account-rate", "off")
	noisyTok := hostileGraphQL(b, r, attackerIP, "", `mutation{ signUp(name: "noisy"){ token } }`, "signUp", "token")
	noisyEP := hostileGraphQL(b, r, attackerIP, noisyTok, `mutation{ createEndpoint(input:{name:"n", mode: LOG}){ id } }`, "createEndpoint", "id")
	quietTok := hostileGraphQL(b, r, "127.0.0.1", "", `mutation{ signUp(name: "quiet"){ token } }`, "signUp", "token")
	quietEP := hostileGraphQL(b, r, "127.0.0.1", quietTok, `mutation{ createEndpoint(input:{name:"q", mode: LOG}){ id } }`, "createEndpoint", "id")
	noisyID := hostileGraphQL(b, r, attackerIP, noisyTok, `{ me { id } }`, "me", "id")
	if out, code := harness.RunCLI(b, "accounts", "set-quota", noisyID, "--storage", neighbourQuota,
		"--server", r.BareURL(), "--admin-token", quotaAdmin); code != 0 {
		b.Fatalf("set-quota exited %d:\n%s", code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), neighbourQuiet)
	before := quietTenant(ctx, r, quietEP, quietTok)
	cancel()

	ctx, cancel = context.WithTimeout(context.Background(), neighbourNoisy)
	defer cancel()
	var accepted, refused, other atomic.Int64
	var firstOther atomic.Value
	var wg sync.WaitGroup
	client := clientFrom(attackerIP, neighbourSender)
	body := bytes.Repeat([]byte("n"), neighbourBody)
	for range neighbourSender {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(r.Port)+"/fill", bytes.NewReader(body))
				req.Host = r.AddressHost(noisyEP)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				switch resp.StatusCode {
				case http.StatusNoContent:
					accepted.Add(1)
				case http.StatusInsufficientStorage:
					refused.Add(1)
				default:
					if other.Add(1) == 1 {
						b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
						firstOther.Store(resp.Status + ": " + string(b))
					}
				}
				drainResp(resp, nil)
			}
		}()
	}
	during := quietTenant(ctx, r, quietEP, quietTok)
	wg.Wait()

	out, code := harness.RunCLI(b, "accounts", "usage", noisyID, "--server", r.BareURL(), "--admin-token", quotaAdmin, "-o", "json")
	if code != 0 {
		b.Fatalf("accounts usage exited %d:\n%s", code, out)
	}
	var u accountUsage
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(100*before.okRatio(), "quiet-ok-before-%")
	b.ReportMetric(float64(before.p99())/float64(time.Millisecond), "quiet-p99-before-ms")
	b.ReportMetric(100*during.okRatio(), "quiet-ok-during-%")
	b.ReportMetric(float64(during.p99())/float64(time.Millisecond), "quiet-p99-during-ms")
	b.ReportMetric(float64(during.total()), "quiet-requests-during")
	b.ReportMetric(float64(accepted.Load()), "noisy-accepted")
	b.ReportMetric(float64(refused.Load()), "noisy-507")
	b.ReportMetric(float64(other.Load()), "noisy-other")
	b.ReportMetric(float64(u.StoredBytes)/(1<<20), "noisy-stored-MiB")
	b.ReportMetric(0, "ns/op")
	if before.failed > 0 || during.failed > 0 {
		b.Errorf("the quiet account saw failures: %d before, %d during; first: %s%s", before.failed, during.failed, before.first, during.first)
	}
	if other.Load() > 0 {
		b.Logf("the noisy account got %d other answers; first: %v", other.Load(), firstOther.Load())
	}
	if refused.Load() == 0 {
		b.Errorf("the noisy account was never refused: the quota did not apply")
	}
}

// quietTenant is the quiet account's ordinary traffic: deliveries to its
// Endpoint and reads of its history (steadyTenant).
func quietTenant(ctx context.Context, r *harness.Relay, endpoint, token string) *legitResult {
	return steadyTenant(ctx, r, "endpoint", endpoint, token, []byte(`{"event":"quiet"}`))
}
