package systemtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/agentwire"
	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/systemtest/harness"
)

// attemptFidelity is Attempt.fidelity.
type attemptFidelity struct {
	Status      string
	Differences []string
}

// waitFidelity waits until the delivery's only attempt has an outcome and
// returns its fidelity.
func waitFidelity(t *testing.T, r *harness.Relay, token, deliveryID string) attemptFidelity {
	t.Helper()
	var f attemptFidelity
	harness.Eventually(t, 10*time.Second, "the attempt of "+deliveryID+" recorded", func() bool {
		var out struct {
			Delivery struct {
				Attempts []struct {
					Status   *int
					Fidelity attemptFidelity
				}
			}
		}
		r.MustGraphQL(t, token, `query($id: ID!){ delivery(id: $id){ attempts{ status fidelity{ status differences } } } }`,
			map[string]any{"id": deliveryID}, &out)
		a := out.Delivery.Attempts
		if len(a) != 1 || a[0].Status == nil {
			return false
		}
		f = a[0].Fidelity
		return true
	})
	return f
}

// canonicalDigests computes a receipt's digests as docs/evidence.md
// describes them, independently of the relay's code.
func canonicalDigests(method, target string, headers [][2]string, body []byte) map[string]string {
	excluded := map[string]bool{"host": true, "content-length": true, "connection": true, "keep-alive": true,
		"proxy-connection": true, "te": true, "trailer": true, "transfer-encoding": true, "upgrade": true,
		"proxy-authenticate": true, "proxy-authorization": true,
		"forwarded": true, "x-forwarded-for": true, "x-forwarded-host": true, "x-forwarded-proto": true}
	var lines [][2]string
	for _, h := range headers {
		name := strings.ToLower(h[0])
		if excluded[name] || (name == "user-agent" && h[1] == "") {
			continue
		}
		lines = append(lines, [2]string{name, h[1]})
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i][0] < lines[j][0] })
	var block strings.Builder
	for _, l := range lines {
		block.WriteString(l[0] + ": " + l[1] + "\n")
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	return map[string]string{"request_line": sum([]byte(method + " " + target)), "headers": sum([]byte(block.String())), "body": sum(body)}
}

// TestFidelityReceiptOfListen: `relay listen` reports a receipt with each
// answer; the relay records it beside its own digests of what it sent
// (both recomputable from the documented canonical forms) and shows the
// attempt as identical, in the API and in `relay deliveries show`.
func TestFidelityReceiptOfListen(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	h, acct := loggedInHome(t, r)
	seen, port := recordingTarget(t)
	ep := createEndpointFor(t, r, acct.Token, map[string]any{"name": "shop", "mode": "PROXY", "target": "localhost:" + port})
	listen := h.startIn(t, t.TempDir(), "listen", port, "shop")
	waitOutput(t, listen, regexp.MustCompile(`(?m)^endpoint shop `))
	waitAgent(t, r, acct.Token, ep.ID, true)

	headers := [][2]string{{"X-Sig", "v1=abc"}, {"x-multi", "one"}, {"Content-Type", "application/json"},
		{"X-Multi", "two"}, {"User-Agent", "Stripe/1.0 (+https://stripe.com)"}, {"X-Forwarded-For", "198.51.100.9"}}
	body := []byte(`{"id":"evt_1","amount":100}`)
	if resp := send(t, r, ep.ID, "POST", "/hook?a=1&b", headers, body); resp.Status != 200 {
		t.Fatalf("sender got %d %q", resp.Status, resp.Body)
	}
	if got := seen.last(t); got.Header.Get("X-Forwarded-Host") == "" || !bytes.Equal(got.Body, body) {
		t.Fatalf("the local process got %v %q, want the body and the agent's X-Forwarded-Host", got.Header, got.Body)
	}
	d := deliveryAt(t, r, acct.Token, ep.ID, "/hook?a=1&b")
	if f := waitFidelity(t, r, acct.Token, d.ID); f.Status != "IDENTICAL" || len(f.Differences) != 0 {
		t.Fatalf("fidelity %+v, want IDENTICAL", f)
	}

	// Both sides' digests are in the log, and an independent party gets
	// the same from the request as sent.
	want := canonicalDigests("POST", "/hook?a=1&b", headers, body)
	var recorded struct {
		DeliveryID string `json:"delivery_id"`
		Fidelity   struct{ Agent, Relay map[string]string }
	}
	var stream []logEvent
	for _, e := range logEvents(t, r, acct.Token) {
		if e.Stream == domain.DeliveryStream(d.ID) {
			stream = append(stream, e)
		}
	}
	if answer, _, ok := answerEvent(t, stream); !ok {
		t.Fatalf("no recorded answer among %+v", stream)
	} else if err := json.Unmarshal(answer, &recorded); err != nil {
		t.Fatal(err)
	}
	if recorded.DeliveryID != d.ID || !reflect.DeepEqual(recorded.Fidelity.Agent, want) || !reflect.DeepEqual(recorded.Fidelity.Relay, want) {
		t.Fatalf("recorded fidelity %+v of %s, want both sides %v", recorded.Fidelity, recorded.DeliveryID, want)
	}

	if out, code := h.run(t, "", "deliveries", "show", d.ID); code != 0 || !strings.Contains(out, "fidelity identical") {
		t.Errorf("deliveries show: exit %d, want the attempt's fidelity identical\n%s", code, out)
	}
	var shown jsonDelivery
	h.jsonOut(t, &shown, "deliveries", "show", d.ID, "-o", "json")
	if len(shown.Attempts) != 1 || shown.Attempts[0].Fidelity.Status != "IDENTICAL" || shown.Attempts[0].Fidelity.Differences == nil {
		t.Errorf("deliveries show -o json: attempts %+v, want one IDENTICAL with no differences", shown.Attempts)
	}
}

// fidelityAgent is an agent written here, speaking agentwire: it takes
// one forward request, alters it as told and completes it with a receipt
// of what it would hand over, honestly computed, or with none.
func fidelityAgent(t *testing.T, r *harness.Relay, token, endpointID, subprotocol string) *binaryAgent {
	t.Helper()
	a := dialBinaryAs(t, r, token, subprotocol)
	a.json(map[string]any{"id": "forward-0", "type": gqlws.Subscribe,
		"payload": map[string]any{"query": forwardRequestsSubscription, "variables": map[string]any{"e": endpointID}}})
	waitAgent(t, r, token, endpointID, true)
	return a
}

// TestFidelityCatchesAlteration: an agent that hands the local process
// something else than the relay sent (a header rewritten, a body byte
// changed, another path) and says so in an honest receipt gets its attempt
// marked DIFFERENT, naming exactly the altered parts; an agent that
// reports no receipt, or speaks the older subprotocol without receipts,
// gets NOT_REPORTED; a malformed receipt is refused naming its field.
func TestFidelityCatchesAlteration(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "fidelity")
	ep := proxyEndpoint(t, r, acct.Token, "127.0.0.1:9", false)
	headers := [][2]string{{"Content-Type", "application/json"}, {"X-Sig", "v1=abc"}}
	body := []byte(`{"n":1}`)

	for i, tt := range []struct {
		name        string
		subprotocol string
		alter       func(f *agentwire.Forward)
		noReceipt   bool
		want        attemptFidelity
	}{
		{name: "honest", subprotocol: agentwire.Subprotocol, alter: func(*agentwire.Forward) {},
			want: attemptFidelity{"IDENTICAL", []string{}}},
		{name: "header and body byte", subprotocol: agentwire.Subprotocol, alter: func(f *agentwire.Forward) {
			for i, h := range f.Headers {
				if h.Name == "X-Sig" {
					f.Headers[i].Value = "v1=abd"
				}
			}
			f.Body = append([]byte{}, f.Body...)
			f.Body[len(f.Body)-2] = '2'
		}, want: attemptFidelity{"DIFFERENT", []string{"HEADERS", "BODY"}}},
		{name: "header added", subprotocol: agentwire.Subprotocol, alter: func(f *agentwire.Forward) {
			f.Headers = append(f.Headers, domain.Header{Name: "X-Debug", Value: "1"})
		}, want: attemptFidelity{"DIFFERENT", []string{"HEADERS"}}},
		{name: "path", subprotocol: agentwire.Subprotocol, alter: func(f *agentwire.Forward) { f.Target += "/extra" },
			want: attemptFidelity{"DIFFERENT", []string{"REQUEST_LINE"}}},
		{name: "no receipt", subprotocol: agentwire.Subprotocol, noReceipt: true,
			want: attemptFidelity{"NOT_REPORTED", []string{}}},
		{name: "relay-agent.v2", subprotocol: agentwire.SubprotocolV2, alter: func(*agentwire.Forward) {},
			want: attemptFidelity{"IDENTICAL", []string{}}},
		{name: "older subprotocol", subprotocol: agentwire.SubprotocolV1, noReceipt: true,
			want: attemptFidelity{"NOT_REPORTED", []string{}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agent := fidelityAgent(t, r, acct.Token, ep.ID, tt.subprotocol)
			defer func() {
				// The next case's agent must be the only one served.
				agent.conn.Close()
				waitAgent(t, r, acct.Token, ep.ID, false)
			}()
			path := "/alter/" + strconv.Itoa(i)
			answered := make(chan harness.Response, 1)
			go func() {
				resp, _ := r.TrySendRaw(harness.RawRequest{Method: "POST", Target: path, Host: r.AddressHost(ep.ID), Headers: headers, Body: body})
				answered <- resp
			}()
			typ, data := agent.read()
			if typ != websocket.BinaryMessage {
				t.Fatalf("forward request as %q, want a binary frame", data)
			}
			f, err := agentwire.DecodeForward(data)
			if err != nil {
				t.Fatal(err)
			}
			c := agentwire.Complete{AttemptID: f.AttemptID, Status: 200, Body: []byte("ok")}
			if !tt.noReceipt {
				tt.alter(&f)
				receipt := domain.DigestRequest(f.Method, f.Target, f.Headers, f.Body)
				c.Receipt = &receipt
			}
			agent.binary(agentwire.AppendComplete(nil, c))
			if !agentwire.Acknowledges(tt.subprotocol) {
				// relay-agent.v3: a report taken gets no Done frame.
			} else if d := agent.done(); d.Code != "" {
				t.Fatalf("complete: %+v, want taken", d)
			}
			if resp := <-answered; resp.Status != 200 {
				t.Fatalf("sender got %d", resp.Status)
			}
			if got := waitFidelity(t, r, acct.Token, f.DeliveryID); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("fidelity %+v, want %+v", got, tt.want)
			}
		})
	}

	t.Run("malformed receipt", func(t *testing.T) {
		agent := fidelityAgent(t, r, acct.Token, ep.ID, agentwire.Subprotocol)
		go func() {
			_, _ = r.TrySendRaw(harness.RawRequest{Method: "POST", Target: "/bad", Host: r.AddressHost(ep.ID), Body: body})
		}()
		_, data := agent.read()
		f, err := agentwire.DecodeForward(data)
		if err != nil {
			t.Fatal(err)
		}
		receipt := domain.DigestRequest(f.Method, f.Target, f.Headers, f.Body)
		receipt.Body = strings.ToUpper(receipt.Body)
		agent.binary(agentwire.AppendComplete(nil, agentwire.Complete{AttemptID: f.AttemptID, Status: 200, Receipt: &receipt}))
		if d := agent.done(); d.Code != "INVALID_INPUT" || !strings.Contains(d.Message, "receipt.body") {
			t.Errorf("complete with an upper-case digest: %+v, want INVALID_INPUT naming receipt.body", d)
		}
	})
}

// TestFidelityReceiptOverGraphQL: a third-party agent that completes over
// GraphQL gives its receipt in completeForward's input: recorded as on
// the binary path; a malformed one is refused naming the field.
func TestFidelityReceiptOverGraphQL(t *testing.T) {
	t.Parallel()
	r := harness.Start(t, "")
	acct := signUpTenant(t, r, "gql")
	ep := proxyEndpoint(t, r, acct.Token, "127.0.0.1:9", false)
	work := r.Subscribe(t, acct.Token, forwardRequestsSubscription, map[string]any{"e": ep.ID})
	defer work.Close()
	waitAgent(t, r, acct.Token, ep.ID, true)

	headers := [][2]string{{"X-Sig", "v1"}}
	body := []byte("hello")
	answered := make(chan harness.Response, 1)
	go func() {
		resp, _ := r.TrySendRaw(harness.RawRequest{Method: "PUT", Target: "/g", Host: r.AddressHost(ep.ID), Headers: headers, Body: body})
		answered <- resp
	}()
	var fr struct {
		ForwardRequests struct{ AttemptID, DeliveryID string }
	}
	if err := json.Unmarshal(work.Next(t, 10*time.Second), &fr); err != nil {
		t.Fatal(err)
	}
	// Digested by hand from the request as sent, with one header value
	// changed: the agent says it handed that over.
	digests := canonicalDigests("PUT", "/g", [][2]string{{"X-Sig", "v2"}}, body)
	const complete = `mutation($in: CompleteForwardInput!){ completeForward(input: $in) }`
	in := func(receipt map[string]any) map[string]any {
		return map[string]any{"in": map[string]any{"attemptId": fr.ForwardRequests.AttemptID, "status": 200,
			"bodyBase64": base64.StdEncoding.EncodeToString([]byte("ok")), "receipt": receipt}}
	}
	bad := r.GraphQL(t, acct.Token, complete, in(map[string]any{"requestLine": "abc", "headers": digests["headers"], "body": digests["body"]}))
	if len(bad.Errors) == 0 || bad.Errors[0].Code() != "INVALID_INPUT" || !strings.Contains(bad.Errors[0].Message, "receipt.requestLine") {
		t.Fatalf("a malformed receipt: %+v, want INVALID_INPUT naming receipt.requestLine", bad.Errors)
	}
	r.MustGraphQL(t, acct.Token, complete, in(map[string]any{"requestLine": digests["request_line"], "headers": digests["headers"], "body": digests["body"]}), nil)
	if resp := <-answered; resp.Status != 200 {
		t.Fatalf("sender got %d", resp.Status)
	}
	if got := waitFidelity(t, r, acct.Token, fr.ForwardRequests.DeliveryID); got.Status != "DIFFERENT" || !reflect.DeepEqual(got.Differences, []string{"HEADERS"}) {
		t.Errorf("fidelity %+v, want DIFFERENT: HEADERS", got)
	}
}
