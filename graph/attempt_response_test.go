package graph_test

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestAttemptResponsesReadBodiesWhenSelected: an attempt's response is
// read with its body only when the query selects the body (directly or
// through a fragment); a query of statuses gets them, captured as stored,
// without bodies.
func TestAttemptResponsesReadBodiesWhenSelected(t *testing.T) {
	e := newEnv(t)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
	epID := acct.endpoint
	answer := bytes.Repeat([]byte("a"), 1<<20)
	e.seed(t, domain.DeliveryStream("d1"), time.Now().Add(-time.Minute),
		domain.DeliveryReceived{DeliveryID: "d1", Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
			Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Body: []byte("{}"), BodySize: 2, Complete: true},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "d1-a1", EndpointID: epID},
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "d1-a1", Status: 201, Body: answer, BodySize: int64(len(answer)), Captured: true, DurationMs: 1},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "d1-a2", EndpointID: epID, Retry: true},
		domain.ForwardFailed{DeliveryID: "d1", AttemptID: "d1-a2", Status: 502, Error: "refused", DurationMs: 1})

	type response struct {
		Status   int
		Captured bool
		Body     *string
		// BodyBase64 of the answer, when selected
		BodyBase64 *string
	}
	for _, tc := range []struct {
		name, selection string
		body            bool
	}{
		{"statuses", `status captured`, false},
		{"body", `status captured body`, true},
		{"body in a fragment", `status captured ...Answer`, true},
		{"base64 only", `status captured bodyBase64`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out struct {
				Delivery struct {
					Attempts []struct {
						ID       string
						Response *response
					}
				}
			}
			query := `query { delivery(id: "d1") { attempts { id response { ` + tc.selection + ` } } } }
				fragment Answer on AttemptResponse { body }`
			if tc.selection != `status captured ...Answer` {
				query = `query { delivery(id: "d1") { attempts { id response { ` + tc.selection + ` } } } }`
			}
			if err := e.c.Post(query, &out, acct.auth); err != nil {
				t.Fatal(err)
			}
			at := out.Delivery.Attempts
			if len(at) != 2 || at[0].Response == nil || at[1].Response == nil {
				t.Fatalf("attempts %+v: want two, each with its response", at)
			}
			r := at[0].Response
			read := r.Body != nil || r.BodyBase64 != nil
			whole := (r.Body == nil || *r.Body == string(answer)) && (r.BodyBase64 == nil || len(*r.BodyBase64) == base64Len(len(answer)))
			if r.Status != 201 || !r.Captured || read != tc.body || !whole {
				t.Errorf("the answered attempt's response: status %d captured %v body read %v, whole %v; want 201, captured, body read %v",
					r.Status, r.Captured, read, whole, tc.body)
			}
			if f := at[1].Response; f.Status != 502 || f.Captured || f.Body != nil || f.BodyBase64 != nil {
				t.Errorf("the failed attempt's response: %+v; want 502, nothing captured", f)
			}
		})
	}
}

func base64Len(n int) int { return (n + 2) / 3 * 4 }

// TestRequestPayloadReadsNoAnswer: a query of a delivery's request (its
// headers, its body) does not read its latest answer from the log; one
// that selects the answer does. Before, both read and decoded the answer,
// 8 MiB here.
func TestRequestPayloadReadsNoAnswer(t *testing.T) {
	e := newEnv(t)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
	epID := acct.endpoint
	const size = 8 << 20
	answer := bytes.Repeat([]byte("a"), size)
	e.seed(t, domain.DeliveryStream("d1"), time.Now().Add(-time.Minute),
		domain.DeliveryReceived{DeliveryID: "d1", Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
			Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
			Headers: []domain.Header{{Name: "X-A", Value: "1"}}, Body: []byte("{}"), BodySize: 2, Complete: true},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "d1-a1", EndpointID: epID},
		domain.ForwardResponded{DeliveryID: "d1", AttemptID: "d1-a1", Status: 200, Body: answer, BodySize: size, Captured: true, DurationMs: 1})

	var out struct {
		Delivery struct {
			Headers      []struct{ Name string }
			Body         string
			ResponseBody *string
		}
	}
	allocated := func(query string) uint64 {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := e.c.Post(query, &out, acct.auth); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	request := allocated(`query { delivery(id: "d1") { headers { name } body } }`)
	if len(out.Delivery.Headers) != 1 || out.Delivery.Body != "{}" {
		t.Fatalf("the request read as %+v", out.Delivery)
	}
	if request > size/2 {
		t.Errorf("a query of the request allocated %d bytes beside an answer of %d: the answer was read", request, size)
	}
	withAnswer := allocated(`query { delivery(id: "d1") { body responseBody } }`)
	if r := out.Delivery.ResponseBody; r == nil || len(*r) != size {
		t.Fatalf("the answer read as %v", r)
	}
	if withAnswer < size {
		t.Errorf("a query of the answer allocated %d bytes, less than the answer's %d: the measure is wrong", withAnswer, size)
	}
}

// TestResponsesPastOneReadAreReadAlone: the responses of a delivery's
// attempts past one read's bounds (64 MiB of the log) are null, each with
// an error at its path that says why and names the attempt field, which
// reads it alone. Before, they read as not captured, without headers.
func TestResponsesPastOneReadAreReadAlone(t *testing.T) {
	e := newEnv(t)
	acct := e.accountWithEndpoint(t, `{name: "p", mode: PROXY, target: "127.0.0.1:3000", responseCapture: true}`)
	epID := acct.endpoint
	const (
		answers = 6
		size    = 10 << 20 // 14 MB in base64: the sixth is past 64 MiB
	)
	events := []domain.Event{domain.DeliveryReceived{DeliveryID: "d1", Address: epID, AddressKind: domain.AddressEndpoint, AccountID: acct.id,
		Method: "POST", Target: "/hook", Host: epID + ".localhost", Proto: "HTTP/1.1", RemoteAddr: "127.0.0.1:1",
		Body: []byte("{}"), BodySize: 2, Complete: true}}
	for i := range answers {
		id := fmt.Sprintf("d1-a%d", i)
		events = append(events, domain.ForwardRequested{DeliveryID: "d1", AttemptID: id, EndpointID: epID, Retry: i > 0},
			domain.ForwardResponded{DeliveryID: "d1", AttemptID: id, Status: 200 + i, Headers: []domain.Header{{Name: "X-N", Value: fmt.Sprint(i)}},
				Body: bytes.Repeat([]byte{'a'}, size), BodySize: size, Captured: true, DurationMs: 1})
	}
	e.seed(t, domain.DeliveryStream("d1"), time.Now().Add(-time.Minute), events...)

	type response struct {
		Status   int
		Captured bool
		Headers  []struct{ Name, Value string }
	}
	var out struct {
		Delivery struct {
			Attempts []struct {
				ID       string
				Response *response
			}
			Attempt *struct {
				ID       string
				Response *response
			}
		}
	}
	err := e.c.Post(`query { delivery(id: "d1") { attempts { id response { status captured headers { name value } } } } }`, &out, acct.auth)
	at := out.Delivery.Attempts
	if len(at) != answers {
		t.Fatalf("%d attempts read (%v), want %d", len(at), err, answers)
	}
	for i, a := range at[:answers-1] {
		if r := a.Response; r == nil || r.Status != 200+i || !r.Captured || len(r.Headers) != 1 {
			t.Errorf("attempt %s within the read: %+v", a.ID, r)
		}
	}
	last := at[answers-1]
	if last.Response != nil || err == nil ||
		!strings.Contains(err.Error(), `"path":["delivery","attempts",5,"response"]`) ||
		!strings.Contains(err.Error(), "ANSWER_TOO_LARGE") || !strings.Contains(err.Error(), "attempt field") {
		t.Errorf("attempt %s past the read: response %+v, error %v; want null and an error at its path naming the attempt field", last.ID, last.Response, err)
	}

	if err := e.c.Post(`query { delivery(id: "d1") { attempt(id: "d1-a5") { id response { status captured headers { name value } } } } }`, &out, acct.auth); err != nil {
		t.Fatal(err)
	}
	if a := out.Delivery.Attempt; a == nil || a.Response == nil || a.Response.Status != 205 || !a.Response.Captured || len(a.Response.Headers) != 1 || a.Response.Headers[0].Value != "5" {
		t.Errorf("the attempt read alone: %+v", a)
	}
	var none struct {
		Delivery struct{ Attempt *struct{ ID string } }
	}
	if err := e.c.Post(`query { delivery(id: "d1") { attempt(id: "none") { id } } }`, &none, acct.auth); err != nil || none.Delivery.Attempt != nil {
		t.Errorf("an unknown attempt: %+v, %v; want null", none.Delivery.Attempt, err)
	}
}
