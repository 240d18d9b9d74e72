package graph_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ratelimit"
)

// TestBulkMutationsAreRatedPerAccount: a redrive appends up to 1 000
// events in one call, so the calls are admitted per account
// (Resolver.BulkRate): past the burst they are RATE_LIMITED with
// retryAfterSeconds and put nothing back, while another account's call
// still runs.
func TestBulkMutationsAreRatedPerAccount(t *testing.T) {
	const burst = 3
	e := newEnvWith(t, nil, func(r *graph.Resolver) {
		// A rate that refills nothing while the test runs.
		r.BulkRate = ratelimit.Rate{N: 1, Per: time.Hour, Burst: burst}
	})
	account := func(name string) (auth client.Option, accountID, endpointID string) {
		t.Helper()
		var su struct {
			SignUp struct {
				Token   string
				Account struct{ ID string }
			}
		}
		e.c.MustPost(`mutation($n: String!) { signUp(name: $n) { token account { id } } }`, &su, client.Var("n", name))
		auth = client.AddHeader("Authorization", "Bearer "+su.SignUp.Token)
		var ep struct{ CreateEndpoint struct{ ID string } }
		e.c.MustPost(`mutation { createEndpoint(input: {name: "q", mode: QUEUE}) { id } }`, &ep, auth)
		return auth, su.SignUp.Account.ID, ep.CreateEndpoint.ID
	}
	// dead records a queued delivery of the Endpoint that died.
	dead := func(accountID, endpointID string) {
		t.Helper()
		id := commands.NewDeliveryID()
		e.seed(t, domain.DeliveryStream(id), time.Now(), domain.DeliveryReceived{
			DeliveryID: id, Address: endpointID, AddressKind: domain.AddressEndpoint, AccountID: accountID,
			Method: "POST", Target: "/q", Host: "h", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1", Body: []byte("b"), BodySize: 1, Complete: true, Queued: true,
		}, domain.DeliveryDead{DeliveryID: id, Failures: 3, Reason: "dead after 3 attempts"})
	}
	redrive := func(auth client.Option, endpointID string, page bool) (code string, retry float64, message string) {
		t.Helper()
		q := `mutation($ep: ID!) { redriveDead(endpoint: $ep) }`
		if page {
			q = `mutation($ep: ID!) { redriveDeadPage(endpoint: $ep) { redriven } }`
		}
		resp, err := e.c.RawPost(q, client.Var("ep", endpointID), auth)
		if err != nil {
			t.Fatal(err)
		}
		var errs []struct {
			Message    string
			Extensions map[string]any
		}
		if len(resp.Errors) > 0 {
			if err := json.Unmarshal(resp.Errors, &errs); err != nil {
				t.Fatal(err)
			}
			code, _ = errs[0].Extensions["code"].(string)
			retry, _ = errs[0].Extensions["retryAfterSeconds"].(float64)
			message = errs[0].Message
		}
		return code, retry, message
	}
	requeued := func() int {
		t.Helper()
		n := 0
		var after uint64
		for {
			batch, err := e.store.ReadAll(t.Context(), after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if len(batch) == 0 {
				return n
			}
			for _, ev := range batch {
				if ev.Type == domain.TypeDeliveryRequeued {
					n++
				}
			}
			after = batch[len(batch)-1].Position
		}
	}

	auth, accountID, ep := account("looper")
	const tries = 3 * burst
	admitted, refused := 0, 0
	for i := range tries {
		dead(accountID, ep)
		switch code, retry, message := redrive(auth, ep, i%2 == 1); {
		case code == "":
			admitted++
		case code == "RATE_LIMITED" && retry >= 1 && strings.Contains(message, "bulk changes"):
			refused++
		default:
			t.Fatalf("redrive %d: %s %q, retry in %v s", i, code, message, retry)
		}
	}
	put := requeued()
	t.Logf("%d redrive calls of one account: %d admitted, %d refused; %d deliveries put back", tries, admitted, refused, put)
	if admitted != burst || refused != tries-burst || put != burst {
		t.Errorf("%d redrive calls: %d admitted, %d refused, %d put back; want %d, %d, %d", tries, admitted, refused, put, burst, tries-burst, burst)
	}

	other, otherID, otherEp := account("other")
	dead(otherID, otherEp)
	if code, _, message := redrive(other, otherEp, true); code != "" || requeued() != put+1 {
		t.Errorf("another account's redrive: %s %q, %d put back in all; want it to run", code, message, requeued())
	}
}
