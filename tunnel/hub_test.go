package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/testwait"
)

func TestForwardWithoutAgent(t *testing.T) {
	e := newEnv(t)
	cmd := e.Receive(t, "ep-none", "acc-1")
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	if out.Status != 503 || out.Error != "no agent connected" || out.AttemptID != cmd.AttemptID {
		t.Errorf("outcome %+v, want 503 no agent connected", out)
	}
	_, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
	f, ok := ev.(domain.ForwardFailed)
	if !ok || f.Status != 503 || f.Error != "no agent connected" || f.AttemptID != cmd.AttemptID || f.DeliveryID != cmd.DeliveryID {
		t.Errorf("last event %#v, want ForwardFailed 503", ev)
	}
}

func TestForwardAnswered(t *testing.T) {
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%v", capture), func(t *testing.T) {
			e := newEnv(t)
			info := SessionInfo{AgentID: "agent-1", EndpointID: "ep-1", AccountID: "acc-1", Target: "127.0.0.1:3000"}
			got, _ := e.agent(t, info, okAnswer)
			cmd := e.Receive(t, "ep-1", "acc-1")
			cmd.CaptureResponse = capture

			out, err := e.hub.Forward(t.Context(), cmd)
			if err != nil {
				t.Fatalf("forward: %v", err)
			}
			sent := recv(t, got)
			if sent.Target != cmd.Target || !bytes.Equal(sent.Body, cmd.Body) || !slices.Equal(sent.Headers, cmd.Headers) || sent.Method != "POST" {
				t.Errorf("agent got %+v, want the command as sent", sent)
			}
			wantBody := "pong " + cmd.AttemptID
			if out.Status != 200 || string(out.Body) != wantBody || out.Failed() || out.AgentID != "agent-1" || out.DurationMs != 7 {
				t.Errorf("outcome %+v, want 200 %q from agent-1", out, wantBody)
			}
			if len(out.Headers) != 2 || out.Headers[1].Value != "b=2" {
				t.Errorf("outcome headers %v, want both Set-Cookie", out.Headers)
			}

			recs := e.Events(t, domain.DeliveryStream(cmd.DeliveryID))
			rec, ev := recs[len(recs)-1], e.Decode(t, recs[len(recs)-1])
			r, ok := ev.(domain.ForwardResponded)
			if !ok {
				t.Fatalf("last event %#v, want ForwardResponded", ev)
			}
			if r.Status != 200 || r.AttemptID != cmd.AttemptID || r.AgentID != "agent-1" || r.BodySize != int64(len(wantBody)) || r.Captured != capture || len(r.Headers) != 2 {
				t.Errorf("recorded %+v", r)
			}
			if capture && string(r.Body) != wantBody {
				t.Errorf("captured body %q, want %q", r.Body, wantBody)
			}
			if !capture && len(r.Body) != 0 {
				t.Errorf("body %q stored although capture is off", r.Body)
			}
			if out.Position != rec.Position {
				t.Errorf("reply names log position %d, the outcome is at %d", out.Position, rec.Position)
			}
			if rec.Metadata.CorrelationID != cmd.CorrelationID || rec.Metadata.CausationID != recs[1].ID {
				t.Errorf("trace %+v, want correlation %s and the ForwardRequested %s as cause", rec.Metadata, cmd.CorrelationID, recs[1].ID)
			}
		})
	}
}

func TestForwardAgentReports(t *testing.T) {
	tests := []struct {
		name       string
		report     domain.ForwardOutcome
		wantStatus int
		wantError  string
	}{
		{"unreachable target", domain.ForwardOutcome{Error: "nothing listening at 127.0.0.1:3000 (connect: connection refused)"}, 502, "nothing listening at 127.0.0.1:3000 (connect: connection refused)"},
		{"local timeout", domain.ForwardOutcome{Status: 504, Error: "127.0.0.1:3000 did not answer within 5s"}, 504, "127.0.0.1:3000 did not answer within 5s"},
		{"status with error", domain.ForwardOutcome{Status: 200, Error: "broken"}, 502, "broken"},
		{"invalid status", domain.ForwardOutcome{Status: 42}, 502, "agent reported invalid status 42"},
		{"interim status", domain.ForwardOutcome{Status: 101}, 502, "agent reported invalid status 101"},
		{"status past 599", domain.ForwardOutcome{Status: 600}, 502, "agent reported invalid status 600"},
		{"local 404 passes", domain.ForwardOutcome{Status: 404, Body: []byte("nope")}, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, func(domain.ForwardCommand) (domain.ForwardOutcome, bool) {
				return tt.report, true
			})
			cmd := e.Receive(t, "ep", "acc")
			out, err := e.hub.Forward(t.Context(), cmd)
			if err != nil {
				t.Fatalf("forward: %v", err)
			}
			if out.Status != tt.wantStatus || out.Error != tt.wantError {
				t.Errorf("outcome %d %q, want %d %q", out.Status, out.Error, tt.wantStatus, tt.wantError)
			}
			_, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
			switch ev := ev.(type) {
			case domain.ForwardFailed:
				if tt.wantError == "" || ev.Status != tt.wantStatus || ev.Error != tt.wantError {
					t.Errorf("recorded %+v", ev)
				}
			case domain.ForwardResponded:
				if tt.wantError != "" || ev.Status != tt.wantStatus {
					t.Errorf("recorded %+v", ev)
				}
			default:
				t.Errorf("last event %#v", ev)
			}
		})
	}
}

func TestForwardTimeout(t *testing.T) {
	e := newEnv(t)
	got, _ := e.agent(t, SessionInfo{AgentID: "slow", EndpointID: "ep", AccountID: "acc"}, never)
	cmd := e.Receive(t, "ep", "acc")
	cmd.Timeout = 100 * time.Millisecond
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	if out.Status != 504 || out.Error != "local target did not answer within 100ms" || out.AgentID != "slow" {
		t.Errorf("outcome %+v, want 504 naming the timeout", out)
	}
	_, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
	if f, ok := ev.(domain.ForwardFailed); !ok || f.Status != 504 {
		t.Errorf("last event %#v, want ForwardFailed 504", ev)
	}
	// The agent's late answer finds nothing pending.
	recv(t, got)
	err = e.hub.Complete(t.Context(), "acc", "slow", domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200})
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("late complete = %v, want ErrNotFound", err)
	}
}

// An agent that reads nothing fills its session's queue; a forward that
// finds it full waits for room no longer than its timeout, and is then
// answered as any unanswered forward is.
func TestForwardTimeoutWhileTheQueueIsFull(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := e.hub.Attach(ctx, SessionInfo{AgentID: "stuck", EndpointID: "ep", AccountID: "acc"}); err != nil {
		t.Fatalf("attach: %v", err)
	}
	outs := make(chan domain.ForwardOutcome, sessionQueue+1)
	for range sessionQueue + 1 { // one more than the queue holds
		cmd := e.Receive(t, "ep", "acc")
		cmd.Timeout = 200 * time.Millisecond
		go func() {
			out, err := e.hub.Forward(t.Context(), cmd)
			if err != nil {
				t.Errorf("forward: %v", err)
			}
			outs <- out
		}()
	}
	for range sessionQueue + 1 {
		select {
		case out := <-outs:
			if out.Status != 504 || out.AgentID != "stuck" {
				t.Errorf("outcome %+v, want 504 from the stuck agent", out)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a forward waiting for room in the queue outlived its timeout")
		}
	}
}

func TestAgentDetachMidFlight(t *testing.T) {
	e := newEnv(t)
	got, stop := e.agent(t, SessionInfo{AgentID: "leaving", EndpointID: "ep", AccountID: "acc"}, never)
	cmd := e.Receive(t, "ep", "acc")
	type result struct {
		out domain.ForwardOutcome
		err error
	}
	res := make(chan result, 1)
	go func() {
		out, err := e.hub.Forward(context.Background(), cmd)
		res <- result{out, err}
	}()
	recv(t, got) // in flight at the agent
	stop()
	r := <-res
	if r.err != nil {
		t.Fatalf("forward: %v", r.err)
	}
	if r.out.Status != 503 || r.out.Error != "agent disconnected" {
		t.Errorf("outcome %+v, want 503 agent disconnected", r.out)
	}
	_, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
	if f, ok := ev.(domain.ForwardFailed); !ok || f.Status != 503 || f.Error != "agent disconnected" || f.AgentID != "leaving" {
		t.Errorf("last event %#v, want ForwardFailed 503 from the agent", ev)
	}
	if n := e.hub.Connected("ep"); n != 0 {
		t.Errorf("Connected = %d after detach", n)
	}
	// With the session gone, the next forward finds no agent.
	out, err := e.hub.Forward(t.Context(), e.Receive(t, "ep", "acc"))
	if err != nil || out.Status != 503 || out.Error != "no agent connected" {
		t.Errorf("after detach: %+v, %v; want 503 no agent connected", out, err)
	}
}

func TestAgentEventsRecorded(t *testing.T) {
	e := newEnv(t)
	_, stop := e.agent(t, SessionInfo{AgentID: "ag-1", EndpointID: "ep-7", AccountID: "acc", Target: "127.0.0.1:4000"}, okAnswer)
	if n := e.hub.Connected("ep-7"); n != 1 {
		t.Errorf("Connected = %d, want 1", n)
	}
	recs := e.Events(t, domain.AgentStream("ep-7"))
	if len(recs) != 2 {
		t.Fatalf("agent stream has %d events, want 2 (connected, primary)", len(recs))
	}
	want := domain.AgentConnected{EndpointID: "ep-7", AgentID: "ag-1", Target: "127.0.0.1:4000"}
	if ev := e.Decode(t, recs[0]); !reflect.DeepEqual(ev, want) {
		t.Errorf("event %#v, want %#v", ev, want)
	}
	first := domain.PrimaryChanged{EndpointID: "ep-7", AgentID: "ag-1", Reason: domain.PrimaryFirst}
	if ev := e.Decode(t, recs[1]); ev != first {
		t.Errorf("event %#v, want %#v", ev, first)
	}
	stop()
	recs = e.Events(t, domain.AgentStream("ep-7"))
	if len(recs) != 4 {
		t.Fatalf("agent stream has %d events, want 4", len(recs))
	}
	gone := domain.AgentDisconnected{EndpointID: "ep-7", AgentID: "ag-1", Reason: "agent disconnected"}
	if ev := e.Decode(t, recs[2]); ev != gone {
		t.Errorf("event %#v, want %#v", ev, gone)
	}
	none := domain.PrimaryChanged{EndpointID: "ep-7", Previous: "ag-1", Reason: domain.PrimaryNone}
	if ev := e.Decode(t, recs[3]); ev != none {
		t.Errorf("event %#v, want %#v", ev, none)
	}
}

func TestAttachRefusesBadSessions(t *testing.T) {
	e := newEnv(t)
	e.agent(t, SessionInfo{AgentID: "dup", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	for _, s := range []SessionInfo{
		{EndpointID: "ep", AccountID: "acc"},
		{AgentID: "x", AccountID: "acc"},
		{AgentID: "dup", EndpointID: "ep", AccountID: "acc"},
	} {
		if _, err := e.hub.Attach(t.Context(), s); err == nil {
			t.Errorf("Attach(%+v) succeeded", s)
		}
	}
	if n := e.hub.Connected("ep"); n != 1 {
		t.Errorf("Connected = %d, want 1", n)
	}
}

func TestPrimaryAnswersOthersGetCopies(t *testing.T) {
	e := newEnv(t)
	got1, _ := e.agent(t, SessionInfo{AgentID: "one", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	got2, _ := e.agent(t, SessionInfo{AgentID: "two", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	if n := e.hub.Connected("ep"); n != 2 {
		t.Fatalf("Connected = %d, want 2", n)
	}
	var cmds []domain.ForwardCommand
	for range 3 {
		cmd := e.Receive(t, "ep", "acc")
		out, err := e.hub.Forward(t.Context(), cmd)
		if err != nil || out.Status != 200 || out.AgentID != "one" {
			t.Fatalf("forward: %+v, %v; want 200 from the primary, one", out, err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if c := recv(t, got1); c.AttemptID != cmd.AttemptID {
			t.Errorf("primary got attempt %s, want %s", c.AttemptID, cmd.AttemptID)
		}
		if c := recv(t, got2); c.AttemptID == cmd.AttemptID || c.DeliveryID != cmd.DeliveryID {
			t.Errorf("copy %s of %s, want an attempt of its own of %s", c.AttemptID, c.DeliveryID, cmd.DeliveryID)
		}
		// The copy is an attempt of its own, recorded after the primary's.
		testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			var types []string
			for _, r := range e.Events(t, domain.DeliveryStream(cmd.DeliveryID)) {
				types = append(types, r.Type)
			}
			if len(types) != 5 {
				return fmt.Errorf("delivery stream %v, want received, requested, responded, copy requested, copy responded", types)
			}
			return nil
		})
		recs := e.Events(t, domain.DeliveryStream(cmd.DeliveryID))
		if ev := e.Decode(t, recs[2]).(domain.ForwardResponded); ev.AttemptID != cmd.AttemptID || ev.AgentID != "one" || ev.Copy {
			t.Errorf("primary's outcome %+v", ev)
		}
		req := e.Decode(t, recs[3]).(domain.ForwardRequested)
		res := e.Decode(t, recs[4]).(domain.ForwardResponded)
		if !req.Copy || req.AgentID != "two" || !res.Copy || res.AgentID != "two" || res.AttemptID != req.AttemptID || res.Status != 200 {
			t.Errorf("copy recorded as %+v, %+v", req, res)
		}
	}
}

func TestPrimaryRule(t *testing.T) {
	tests := []struct {
		name     string
		sessions []SessionInfo // in attach order
		leave    []string      // agent IDs that leave, in order
		want     string        // the primary after
		reasons  []string      // every PrimaryChanged reason, in order
	}{
		{"first connected", []SessionInfo{{AgentID: "a"}, {AgentID: "b"}, {AgentID: "c"}}, nil, "a", []string{domain.PrimaryFirst}},
		{"asked wins", []SessionInfo{{AgentID: "a"}, {AgentID: "b", Primary: true}, {AgentID: "c"}}, nil, "b", []string{domain.PrimaryFirst, domain.PrimaryAsked}},
		{"newest asked wins", []SessionInfo{{AgentID: "a", Primary: true}, {AgentID: "b", Primary: true}}, nil, "b", []string{domain.PrimaryAsked, domain.PrimaryAsked}},
		{"oldest takes over", []SessionInfo{{AgentID: "a"}, {AgentID: "b"}, {AgentID: "c"}}, []string{"a"}, "b", []string{domain.PrimaryFirst, domain.PrimaryLeft}},
		{"asked leaves, back to the oldest", []SessionInfo{{AgentID: "a"}, {AgentID: "b"}, {AgentID: "c", Primary: true}}, []string{"c"}, "a",
			[]string{domain.PrimaryFirst, domain.PrimaryAsked, domain.PrimaryLeft}},
		{"a copy leaves: no change", []SessionInfo{{AgentID: "a"}, {AgentID: "b"}}, []string{"b"}, "a", []string{domain.PrimaryFirst}},
		{"none left", []SessionInfo{{AgentID: "a"}}, []string{"a"}, "", []string{domain.PrimaryFirst, domain.PrimaryNone}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			stops := map[string]func(){}
			for _, s := range tt.sessions {
				s.EndpointID, s.AccountID = "ep", "acc"
				_, stops[s.AgentID] = e.agent(t, s, okAnswer)
			}
			for _, id := range tt.leave {
				stops[id]()
			}
			primary := ""
			for _, l := range e.hub.Listeners("ep") {
				if l.IsPrimary {
					primary = l.AgentID
				}
			}
			if primary != tt.want {
				t.Errorf("primary %q, want %q", primary, tt.want)
			}
			if tt.want != "" {
				out, err := e.hub.Forward(t.Context(), e.Receive(t, "ep", "acc"))
				if err != nil || out.AgentID != tt.want {
					t.Errorf("forward answered by %q (%v), want %q", out.AgentID, err, tt.want)
				}
			}
			var reasons []string
			for _, r := range e.Events(t, domain.AgentStream("ep")) {
				if ev, ok := e.Decode(t, r).(domain.PrimaryChanged); ok {
					reasons = append(reasons, ev.Reason)
				}
			}
			if !reflect.DeepEqual(reasons, tt.reasons) {
				t.Errorf("PrimaryChanged reasons %q, want %q", reasons, tt.reasons)
			}
		})
	}
}

func TestFiltersChooseTheSessions(t *testing.T) {
	e := newEnv(t)
	only := func(texts ...string) []domain.Filter {
		fs, err := domain.ParseFilters(texts)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	// The first connected matches nothing: the next matching session answers.
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc", Filters: only("json:n=0")}, okAnswer)
	got, _ := e.agent(t, SessionInfo{AgentID: "b", EndpointID: "ep", AccountID: "acc", Filters: only("method=POST")}, okAnswer)
	cmd := e.Receive(t, "ep", "acc")
	if ok, why := e.hub.Admits(cmd.EndpointID, cmd.AccountID, domain.NewFilterRequest(cmd)); !ok {
		t.Fatalf("Admits: %s", why)
	}
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil || out.AgentID != "b" {
		t.Fatalf("forward answered by %q (%v), want b", out.AgentID, err)
	}
	recv(t, got)
	cmd.Method = "PUT"
	if ok, why := e.hub.Admits(cmd.EndpointID, cmd.AccountID, domain.NewFilterRequest(cmd)); ok || why != "no listener matched: json n="+string(cmd.Body[5:len(cmd.Body)-1])+" not in [0]" {
		t.Errorf("Admits of a PUT = %v, %q", ok, why)
	}
}

// A copy session that never answers does not hold the sender: the
// primary's outcome comes back and is recorded while the copy is still
// pending; the copy is recorded after it, when its own timeout ends.
func TestCopyNeverDelaysThePrimary(t *testing.T) {
	e := newEnv(t)
	e.agent(t, SessionInfo{AgentID: "fast", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	got, _ := e.agent(t, SessionInfo{AgentID: "mute", EndpointID: "ep", AccountID: "acc"}, never)
	cmd := e.Receive(t, "ep", "acc")
	cmd.Timeout = time.Hour // the copy would wait this long
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil || out.Status != 200 || out.AgentID != "fast" {
		t.Fatalf("forward: %+v, %v", out, err)
	}
	copyCmd := recv(t, got)
	e.hub.mu.Lock()
	_, pending := e.hub.pending[copyCmd.AttemptID]
	e.hub.mu.Unlock()
	if !pending {
		t.Fatal("the copy is not pending any more: the primary's answer waited for it")
	}
	_, last := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
	if r, ok := last.(domain.ForwardResponded); !ok || r.AttemptID != cmd.AttemptID {
		t.Fatalf("last event %#v, want the primary's outcome", last)
	}
}

// A copy session whose queue is full gets no copy: it is recorded as
// dropped and the primary answers as usual.
func TestFullCopyQueueDropsTheCopy(t *testing.T) {
	e := newEnv(t)
	e.agent(t, SessionInfo{AgentID: "primary", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	if _, err := e.hub.Attach(t.Context(), SessionInfo{AgentID: "stuck", EndpointID: "ep", AccountID: "acc"}); err != nil {
		t.Fatal(err) // its work channel is never read
	}
	var last domain.ForwardCommand
	for range sessionQueue + 1 {
		last = e.Receive(t, "ep", "acc")
		last.Timeout = time.Hour
		if out, err := e.hub.Forward(t.Context(), last); err != nil || out.Status != 200 {
			t.Fatalf("forward: %+v, %v", out, err)
		}
	}
	testwait.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		recs := e.Events(t, domain.DeliveryStream(last.DeliveryID))
		if f, ok := e.Decode(t, recs[len(recs)-1]).(domain.ForwardFailed); !ok || !f.Copy || f.Error != domain.FailureCopyDropped || f.AgentID != "stuck" {
			return fmt.Errorf("last event %#v, want the copy dropped", e.Decode(t, recs[len(recs)-1]))
		}
		return nil
	})
}

func TestConcurrentForwards(t *testing.T) {
	e := newEnv(t)
	e.agent(t, SessionInfo{AgentID: "one", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	e.agent(t, SessionInfo{AgentID: "two", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	cmds := make([]domain.ForwardCommand, 40)
	for i := range cmds {
		cmds[i] = e.Receive(t, "ep", "acc")
	}
	var wg sync.WaitGroup
	for _, cmd := range cmds {
		wg.Go(func() {
			out, err := e.hub.Forward(t.Context(), cmd)
			if err != nil || out.Status != 200 || string(out.Body) != "pong "+cmd.AttemptID {
				t.Errorf("forward %s: %+v, %v", cmd.AttemptID, out, err)
			}
		})
	}
	wg.Wait()
	// The primary's outcome follows its request; copies come after.
	for _, cmd := range cmds {
		recs := e.Events(t, domain.DeliveryStream(cmd.DeliveryID))
		if r, ok := e.Decode(t, recs[2]).(domain.ForwardResponded); !ok || r.AttemptID != cmd.AttemptID || r.Copy {
			t.Errorf("%s: third event %s, want the primary's outcome", cmd.DeliveryID, recs[2].Type)
		}
	}
}

func TestCompleteFromAnotherAccount(t *testing.T) {
	e := newEnv(t)
	got, _ := e.agent(t, SessionInfo{AgentID: "mine", EndpointID: "ep", AccountID: "acc"}, never)
	// An agent of another account on the same Endpoint ID never gets its work.
	foreign, _ := e.agent(t, SessionInfo{AgentID: "theirs", EndpointID: "ep", AccountID: "other"}, never)
	cmd := e.Receive(t, "ep", "acc")
	res := e.forwardInBackground(t, cmd)
	recv(t, got)
	err := e.hub.Complete(t.Context(), "other", "theirs", domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 200})
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("complete by another account = %v, want ErrNotFound", err)
	}
	if err := e.hub.Complete(t.Context(), "acc", "mine", domain.ForwardOutcome{AttemptID: "unknown", Status: 200}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("complete of an unknown attempt = %v, want ErrNotFound", err)
	}
	if err := e.hub.Complete(t.Context(), "acc", "mine", domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 201}); err != nil {
		t.Fatalf("complete by the owner: %v", err)
	}
	if out := <-res; out.Status != 201 {
		t.Errorf("outcome %+v, want 201", out)
	}
	if len(foreign) != 0 {
		t.Errorf("another account's agent got %d commands", len(foreign))
	}
}

func TestClientHonorsContext(t *testing.T) {
	e := newEnv(t)
	e.agent(t, SessionInfo{AgentID: "slow", EndpointID: "ep", AccountID: "acc"}, never)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := e.hub.Forward(ctx, e.Receive(t, "ep", "acc"))
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("forward past its deadline = %v, want *TimeoutError", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if _, err := e.hub.Forward(ctx, e.Receive(t, "ep", "acc")); !errors.Is(err, context.Canceled) {
		t.Errorf("forward with a cancelled context = %v, want context.Canceled", err)
	}
	if _, err := e.hub.Forward(t.Context(), domain.ForwardCommand{}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Errorf("forward without attempt ID = %v, want ErrInvalidInput", err)
	}
}

func TestForwardOfUnrecordedDeliveryFails(t *testing.T) {
	e := newEnv(t)
	cmd := domain.ForwardCommand{DeliveryID: "ghost", AttemptID: "ghost-1", EndpointID: "ep", AccountID: "acc", Method: "GET", Target: "/"}
	// An attempt whose delivery the log does not hold cannot be recorded:
	// an error, not an outcome (across nodes, a *ReplyError: nodebus).
	_, err := e.hub.Forward(t.Context(), cmd)
	if !errors.Is(err, domain.ErrStreamNotFound) || !strings.Contains(err.Error(), "ghost-1") {
		t.Fatalf("forward = %v, want the delivery's stream not found, naming the attempt", err)
	}
	// The sender's side tells it from an attempt that got no answer.
	if !errors.Is(err, domain.ErrOutcomeNotRecorded) {
		t.Errorf("forward = %v, want it marked as an outcome not recorded", err)
	}
}

// A command another node sends again after its attempt is done is answered
// from the log; when the log cannot settle it either, the answer is marked
// as an outcome not recorded, as the first one was.
func TestCommandReceivedAgainWhoseOutcomeIsRefused(t *testing.T) {
	e := newEnv(t)
	cmd := domain.ForwardCommand{DeliveryID: "ghost", AttemptID: "ghost-1", EndpointID: "ep", AccountID: "acc", Method: "GET", Target: "/"}
	answers := make(chan error, 2)
	answer := func(_ domain.ForwardOutcome, err error) { answers <- err }
	e.hub.Receive(cmd, func() {}, answer)
	if err := <-answers; !errors.Is(err, domain.ErrOutcomeNotRecorded) {
		t.Fatalf("first answer = %v, want an outcome not recorded", err)
	}
	// Sent again while the first run is still finishing, it is only
	// acknowledged; once that run is done, it is answered from the log.
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		acked := false
		e.hub.Receive(cmd, func() { acked = true }, answer)
		if acked {
			return errors.New("the first run is not done yet")
		}
		return nil
	})
	select {
	case err := <-answers:
		if !errors.Is(err, domain.ErrOutcomeNotRecorded) || !errors.Is(err, domain.ErrStreamNotFound) {
			t.Errorf("answer to the command sent again = %v, want the log's refusal marked as an outcome not recorded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command sent again was not answered")
	}
}

// racingStore appends a competing event to a delivery stream right before
// the Hub's first append there, so the Hub meets a real revision conflict.
type racingStore struct {
	domain.EventStore
	e    *env
	once sync.Once
}

func (s *racingStore) Append(ctx context.Context, stream string, expected domain.ExpectedRevision, events ...domain.EventData) (domain.AppendResult, error) {
	if len(events) == 1 && (events[0].Type == domain.TypeForwardResponded) {
		s.once.Do(func() {
			recs, err := s.EventStore.ReadStream(ctx, stream, 0, 100)
			if err != nil {
				panic(err)
			}
			data, _ := s.e.Codec.Encode("00000000-0000-4000-8000-000000000001", domain.DeliveryAnswered{DeliveryID: "x", Status: 202}, time.Now(), domain.Trace{})
			if _, err := s.EventStore.Append(ctx, stream, domain.Exact(recs[len(recs)-1].Revision), data); err != nil {
				panic(err)
			}
		})
	}
	return s.EventStore.Append(ctx, stream, expected, events...)
}

// readCounter counts the stream reads made through it.
type readCounter struct {
	domain.EventStore
	n atomic.Int64
}

func (s *readCounter) ReadStream(ctx context.Context, stream string, from uint64, max int) ([]domain.RecordedEvent, error) {
	s.n.Add(1)
	return s.EventStore.ReadStream(ctx, stream, from, max)
}

func TestRecordRetriesOnConflict(t *testing.T) {
	base := newEnv(t)
	rs := &racingStore{EventStore: base.Store}
	e := newEnvWithStore(t, rs)
	rs.e = e
	e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	cmd := e.Receive(t, "ep", "acc")
	out, err := e.hub.Forward(t.Context(), cmd)
	if err != nil || out.Status != 200 {
		t.Fatalf("forward: %+v, %v", out, err)
	}
	var types []string
	for _, r := range e.Events(t, domain.DeliveryStream(cmd.DeliveryID)) {
		types = append(types, r.Type)
	}
	want := []string{domain.TypeDeliveryReceived, domain.TypeForwardRequested, domain.TypeDeliveryAnswered, domain.TypeForwardResponded}
	if !slices.Equal(types, want) {
		t.Errorf("stream %v, want %v", types, want)
	}
}

func TestCloseStale(t *testing.T) {
	e := newEnv(t)
	// A session a crashed process left open, and a live one.
	connected := domain.AgentConnected{EndpointID: "ep", AgentID: "ghost", Target: "127.0.0.1:1"}
	e.AppendChanges(t, domain.AgentStream("ep"), domain.Any(), []domain.Event{connected}, "")
	e.agent(t, SessionInfo{AgentID: "live", EndpointID: "ep", AccountID: "acc"}, okAnswer)

	open, err := OpenSessions(t.Context(), e.Store, e.Codec)
	if err != nil {
		t.Fatalf("open sessions: %v", err)
	}
	if want := []StaleSession{{"ep", "ghost"}, {"ep", "live"}}; !slices.Equal(open, want) {
		t.Fatalf("open sessions %v, want %v", open, want)
	}
	if err := e.hub.CloseStale(t.Context(), open, RelayRestarted); err != nil {
		t.Fatalf("close stale: %v", err)
	}
	// The ghost's end, then the live session takes over as primary.
	recs := e.Events(t, domain.AgentStream("ep"))
	if len(recs) < 2 {
		t.Fatalf("agent stream has %d events", len(recs))
	}
	if ev, want := e.Decode(t, recs[len(recs)-2]), (domain.AgentDisconnected{EndpointID: "ep", AgentID: "ghost", Reason: "relay restarted"}); ev != want {
		t.Errorf("event %#v, want %#v", ev, want)
	}
	if ev, want := e.Decode(t, recs[len(recs)-1]), (domain.PrimaryChanged{EndpointID: "ep", AgentID: "live", Previous: "ghost", Reason: domain.PrimaryLeft}); ev != want {
		t.Errorf("last event %#v, want %#v", ev, want)
	}
	open, err = OpenSessions(t.Context(), e.Store, e.Codec)
	if err != nil {
		t.Fatalf("open sessions: %v", err)
	}
	if want := []StaleSession{{"ep", "live"}}; !slices.Equal(open, want) {
		t.Errorf("after close: open sessions %v, want %v", open, want)
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("scenario", func(t *testing.T) {
		e := newEnv(t)
		got, stop := e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
		for range 3 {
			if out, err := e.hub.Forward(t.Context(), e.Receive(t, "ep", "acc")); err != nil || out.Status != 200 {
				t.Fatalf("forward: %+v, %v", out, err)
			}
		}
		recv(t, got)
		slow, stopSlow := e.agent(t, SessionInfo{AgentID: "b", EndpointID: "ep2", AccountID: "acc"}, never)
		cmd := e.Receive(t, "ep2", "acc")
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.hub.Forward(context.Background(), cmd)
		}()
		recv(t, slow)
		stopSlow()
		<-done
		stop()
	})
	checkNoLeak(t, before)
}

// TestRecordFastPathAndFallback: a command that names its ForwardRequested
// event is recorded right after it without replaying the stream, and when
// another event came in between the append is refused and replayed.
func TestRecordFastPathAndFallback(t *testing.T) {
	for _, racing := range []bool{false, true} {
		t.Run(fmt.Sprintf("racing=%v", racing), func(t *testing.T) {
			base := newEnv(t)
			reads := &readCounter{EventStore: base.Store}
			var rs *racingStore
			if racing {
				rs = &racingStore{EventStore: base.Store}
				reads.EventStore = rs
			}
			e := newEnvWithStore(t, reads)
			if rs != nil {
				rs.e = e
			}
			e.agent(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}, okAnswer)
			cmd := e.Receive(t, "ep", "acc")
			recs := e.Events(t, domain.DeliveryStream(cmd.DeliveryID))
			cmd.RequestEventID, cmd.RequestRevision = recs[1].ID, recs[1].Revision
			reads.n.Store(0)
			out, err := e.hub.Forward(t.Context(), cmd)
			if err != nil || out.Status != 200 {
				t.Fatalf("forward: %+v, %v", out, err)
			}
			if n := reads.n.Load(); racing && n == 0 || !racing && n != 0 {
				t.Errorf("recording the outcome read the log %d times (racing %v): the fast path reads nothing, the fallback replays", n, racing)
			}
			last, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID))
			if _, ok := ev.(domain.ForwardResponded); !ok || last.Metadata.CausationID != recs[1].ID {
				t.Fatalf("last event %T caused by %q, want ForwardResponded caused by %q", ev, last.Metadata.CausationID, recs[1].ID)
			}
			wantRev := uint64(2)
			if racing {
				wantRev = 3 // after the competing event
			}
			if last.Revision != wantRev {
				t.Fatalf("outcome at revision %d, want %d", last.Revision, wantRev)
			}
			if out.Position != last.Position {
				t.Errorf("reply names log position %d, the outcome is at %d", out.Position, last.Position)
			}
		})
	}
}

// TestClaimDeliversOnlyWhenAsked: Claim takes the attempt at once (a second
// report of it is refused), and the waiting Forward gets the outcome only
// when deliver runs, so the caller can queue its own answer first.
func TestClaimDeliversOnlyWhenAsked(t *testing.T) {
	e := newEnv(t)
	got, _ := e.agent(t, SessionInfo{AgentID: "mine", EndpointID: "ep", AccountID: "acc"}, never)
	cmd := e.Receive(t, "ep", "acc")
	res := e.forwardInBackground(t, cmd)
	recv(t, got)
	deliver, err := e.hub.Claim(t.Context(), "acc", "mine", domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 202})
	if err != nil {
		t.Fatalf("claim of the only attempt pending: %v", err)
	}
	if err := e.hub.Complete(t.Context(), "acc", "mine", domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 500}); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("complete of a claimed attempt = %v, want ErrNotFound", err)
	}
	select {
	case out := <-res:
		t.Fatalf("forward returned %+v before deliver", out)
	case <-time.After(50 * time.Millisecond):
	}
	deliver()
	if out := <-res; out.Status != 202 {
		t.Errorf("outcome %+v, want the claimed 202", out)
	}
}

// TestClaimWithOthersPendingDeliversAtOnce: while other attempts wait, Claim
// hands the outcome over itself: the forward has it before deliver runs,
// and deliver then does nothing.
func TestClaimWithOthersPendingDeliversAtOnce(t *testing.T) {
	e := newEnv(t)
	got, _ := e.agent(t, SessionInfo{AgentID: "mine", EndpointID: "ep", AccountID: "acc"}, never)
	var cmds []domain.ForwardCommand
	var res []<-chan domain.ForwardOutcome
	for range 2 {
		cmd := e.Receive(t, "ep", "acc")
		cmds = append(cmds, cmd)
		res = append(res, e.forwardInBackground(t, cmd))
		recv(t, got)
	}
	deliver, err := e.hub.Claim(t.Context(), "acc", "mine", domain.ForwardOutcome{AttemptID: cmds[0].AttemptID, Status: 203})
	if err != nil {
		t.Fatalf("claim with another attempt pending: %v", err)
	}
	select {
	case out := <-res[0]:
		if out.Status != 203 {
			t.Errorf("outcome %+v, want the claimed 203", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forward did not get the claimed outcome before deliver")
	}
	deliver() // does nothing: the outcome is handed over already
	if err := e.hub.Complete(t.Context(), "acc", "mine", domain.ForwardOutcome{AttemptID: cmds[1].AttemptID, Status: 204}); err != nil {
		t.Fatal(err)
	}
	if out := <-res[1]; out.Status != 204 {
		t.Errorf("outcome %+v, want 204", out)
	}
}
