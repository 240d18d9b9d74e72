package tunnel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/record"
)

// endHeld is a recorder whose appends of a session's end wait until
// release is closed, as a slow store's would, and then fail with fail
// when it is set (a store that refused them).
type endHeld struct {
	Recorder
	entered chan string // the agent ID of each end being appended
	release chan struct{}
	fail    error
}

func (r *endHeld) AgentDisconnected(ctx context.Context, endpointID, agentID, reason string) error {
	r.entered <- agentID
	<-r.release
	if r.fail != nil {
		return r.fail
	}
	return r.Recorder.AgentDisconnected(ctx, endpointID, agentID, reason)
}

// newEndHeld is an env whose Hub records sessions' ends through an
// endHeld; the ends held are released when the test ends, before the
// Hub's Close and the store's.
func newEndHeld(t *testing.T) (*env, *endHeld) {
	t.Helper()
	e := newEnv(t)
	rec := &endHeld{Recorder: record.New(record.Config{Store: e.Store, Codec: e.Codec}), entered: make(chan string, 16), release: make(chan struct{})}
	e.hub = NewHub(HubConfig{Recorder: rec})
	t.Cleanup(e.hub.Close)
	t.Cleanup(func() {
		select {
		case <-rec.release:
		default:
			close(rec.release)
		}
	})
	return e, rec
}

// attachUntil attaches a session that ends when the returned end is
// called; its work is read and dropped.
func (e *env) attachUntil(t *testing.T, info SessionInfo) (end func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	work, err := e.hub.Attach(ctx, info)
	if err != nil {
		cancel()
		t.Fatalf("attach %s: %v", info.AgentID, err)
	}
	go func() {
		for range work {
		}
	}()
	t.Cleanup(cancel)
	return cancel
}

// ending ends a session and waits until its end is being appended.
func ending(t *testing.T, rec *endHeld, end func(), agentID string) {
	t.Helper()
	end()
	select {
	case id := <-rec.entered:
		if id != agentID {
			t.Fatalf("the end of %s is being recorded, want %s", id, agentID)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the end of %s was never recorded", agentID)
	}
}

// position is the log position of the first event of stream of type typ.
func (e *env) position(t *testing.T, stream, typ string) uint64 {
	t.Helper()
	for _, r := range e.Events(t, stream) {
		if r.Type == typ {
			return r.Position
		}
	}
	t.Fatalf("no %s in %s", typ, stream)
	return 0
}

// A delivery that comes while a session's end is being appended, and
// that no other session takes, is refused (503 no agent connected) only
// once the end is in the log. Before, the session left the Hub first: the
// refusal was recorded while the log showed the session open, and its
// explanation said no agent was connected although the last session had
// not ended.
func TestRefusalWaitsForTheSessionsEnd(t *testing.T) {
	e, rec := newEndHeld(t)
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	ending(t, rec, end, "a")
	if n := e.hub.Connected("ep"); n != 1 {
		t.Errorf("Connected = %d while the end is not in the log, want 1, as the log shows", n)
	}

	cmd := e.Receive(t, "ep", "acc")
	res := e.forwardInBackground(t, cmd)
	select {
	case out := <-res:
		t.Fatalf("answered %d %q while the session's end was still being appended", out.Status, out.Error)
	case <-time.After(200 * time.Millisecond):
	}
	close(rec.release)
	var out domain.ForwardOutcome
	select {
	case out = <-res:
	case <-time.After(10 * time.Second):
		t.Fatal("the forward still waits after the session's end was appended")
	}
	if out.Status != 503 || out.Error != domain.FailureNoAgent {
		t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureNoAgent)
	}
	ended := e.position(t, domain.AgentStream("ep"), domain.TypeAgentDisconnected)
	refused := e.position(t, domain.DeliveryStream(cmd.DeliveryID), domain.TypeForwardFailed)
	if refused < ended {
		t.Errorf("the refusal is at %d, before the session's end at %d", refused, ended)
	}
	if n := e.hub.Connected("ep"); n != 0 {
		t.Errorf("Connected = %d once the end is in the log, want 0", n)
	}
}

// Another session of the Endpoint takes the deliveries while one's end is
// being appended: nothing waits for it.
func TestOtherSessionServesWhileOneEnds(t *testing.T) {
	e, rec := newEndHeld(t)
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc", Primary: true})
	e.agent(t, SessionInfo{AgentID: "b", EndpointID: "ep", AccountID: "acc"}, okAnswer)
	ending(t, rec, end, "a")
	cmd := e.Receive(t, "ep", "acc")
	select {
	case out := <-e.forwardInBackground(t, cmd):
		if out.Status != 200 || out.AgentID != "b" {
			t.Fatalf("outcome %+v, want 200 from b", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forward waits for the end of a session that does not take it")
	}
	if ls := e.hub.Listeners("ep"); len(ls) != 2 {
		t.Errorf("%d listeners while a's end is not in the log, want 2, as the log shows", len(ls))
	}
	close(rec.release) // before b's stop, which waits for its end
}

// A store that holds a session's end past the command's timeout does not
// hold the forward: it is answered 503 no agent connected at its timeout.
func TestRefusalWaitIsBoundedByTheTimeout(t *testing.T) {
	e, rec := newEndHeld(t)
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	ending(t, rec, end, "a")
	cmd := e.Receive(t, "ep", "acc")
	cmd.Timeout = 100 * time.Millisecond
	select {
	case out := <-e.forwardInBackground(t, cmd):
		if out.Status != 503 || out.Error != domain.FailureNoAgent {
			t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureNoAgent)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forward waits for a session's end past its timeout")
	}
}

// An end the store refuses still releases the forwards waiting for it,
// and the session leaves the Hub: its agent ID can attach again.
func TestRefusedEndReleasesTheSession(t *testing.T) {
	e, rec := newEndHeld(t)
	rec.fail = errors.New("store unavailable")
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	ending(t, rec, end, "a")
	cmd := e.Receive(t, "ep", "acc")
	res := e.forwardInBackground(t, cmd)
	close(rec.release)
	select {
	case out := <-res:
		if out.Status != 503 || out.Error != domain.FailureNoAgent {
			t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureNoAgent)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the forward still waits after the end's append failed")
	}
	if n := e.hub.Connected("ep"); n != 0 {
		t.Errorf("Connected = %d after the end's append failed, want 0", n)
	}
	e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
}

// A session started again under the same agent ID (a subscription
// started again on its connection) while the earlier one's end is being
// appended waits for that end: the log holds start, end, start. Before,
// the new start came first, and the earlier end closed the new session in
// the views.
func TestSameAgentAttachesAfterItsEnd(t *testing.T) {
	e, rec := newEndHeld(t)
	info := SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"}
	end := e.attachUntil(t, info)
	ending(t, rec, end, "a")
	attached := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		_, err := e.hub.Attach(ctx, info)
		attached <- err
	}()
	select {
	case err := <-attached:
		t.Fatalf("attached (%v) while the earlier session's end was being appended", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(rec.release)
	if err := <-attached; err != nil {
		t.Fatalf("attach again: %v", err)
	}
	var types []string
	for _, r := range e.Events(t, domain.AgentStream("ep")) {
		if r.Type == domain.TypeAgentConnected || r.Type == domain.TypeAgentDisconnected {
			types = append(types, r.Type)
		}
	}
	want := []string{domain.TypeAgentConnected, domain.TypeAgentDisconnected, domain.TypeAgentConnected}
	if len(types) != len(want) || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
		t.Errorf("the agent stream holds %v, want %v", types, want)
	}
}

// CloseStale leaves the end of a session this Hub is ending to the Hub:
// one end is recorded, not two.
func TestCloseStaleLeavesAnEndingSession(t *testing.T) {
	e, rec := newEndHeld(t)
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	ending(t, rec, end, "a")
	closed := make(chan error, 1)
	go func() {
		closed <- e.hub.CloseStale(context.Background(), []StaleSession{{EndpointID: "ep", AgentID: "a"}}, RelayRestarted)
	}()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close stale: %v", err)
		}
	case id := <-rec.entered:
		t.Fatalf("CloseStale records an end of %s, whose end the Hub is recording", id)
	}
	close(rec.release)
	cmd := e.Receive(t, "ep", "acc")
	e.hub.Forward(t.Context(), cmd) // once it returns, the end is in the log
	ends := 0
	for _, r := range e.Events(t, domain.AgentStream("ep")) {
		if r.Type == domain.TypeAgentDisconnected {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("%d ends recorded, want 1", ends)
	}
}

// A copy another node sends for a session whose end is being appended is
// answered agent disconnected at once, not left in a queue nobody reads
// until its timeout.
func TestCopyForAnEndingSession(t *testing.T) {
	e, rec := newEndHeld(t)
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	ending(t, rec, end, "a")
	cmd := e.Receive(t, "ep", "acc")
	cmd.AttemptID, cmd.Copy, cmd.Agent, cmd.Timeout = "copy-1", true, "a", time.Minute
	answered := make(chan domain.ForwardOutcome, 1)
	e.hub.Receive(cmd, func() {}, func(out domain.ForwardOutcome, err error) {
		if err != nil {
			t.Errorf("copy: %v", err)
		}
		answered <- out
	})
	select {
	case out := <-answered:
		if out.Status != 503 || out.Error != domain.FailureAgentDisconnected {
			t.Fatalf("copy's outcome %+v, want 503 %s", out, domain.FailureAgentDisconnected)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a copy for an ending session waits")
	}
}

// The Hub's Close ends a forward waiting for a session's end: it is
// answered 503 relay shutting down, and recorded.
func TestCloseEndsTheWaitForASessionsEnd(t *testing.T) {
	e, rec := newEndHeld(t)
	// The roster is read as the forward starts: Close, for once the
	// senders are in (app.Close), comes after that.
	started := make(chan struct{}, 4)
	e.hub = NewHub(HubConfig{Recorder: rec, Roster: func(string) []RemoteSession {
		started <- struct{}{}
		return nil
	}})
	t.Cleanup(e.hub.Close)
	end := e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	ending(t, rec, end, "a")
	cmd := e.Receive(t, "ep", "acc")
	res := e.forwardInBackground(t, cmd)
	<-started
	select {
	case out := <-res:
		t.Fatalf("answered %+v while the session's end was being appended", out)
	case <-time.After(100 * time.Millisecond):
	}
	e.hub.Close()
	if out := <-res; out.Status != 503 || out.Error != domain.FailureShuttingDown {
		t.Fatalf("outcome %+v, want 503 %s", out, domain.FailureShuttingDown)
	}
	if _, ev := e.Last(t, domain.DeliveryStream(cmd.DeliveryID)); ev.(domain.ForwardFailed).Error != domain.FailureShuttingDown {
		t.Errorf("last event %+v", ev)
	}
}

// A lost node's session whose end the log does not hold yet (the Roster
// marks it Ending) takes no work and no copy, though it is the primary by
// the rule: a session that takes work answers; with none, the plan says
// to wait for the lost node's session's end (lapsed).
func TestLapsedSessionTakesNoWork(t *testing.T) {
	e := newEnv(t)
	lapsed := RemoteSession{AgentID: "b1", Node: "b", Asked: true, Position: 1 << 40, Ending: true}
	cmd := e.Receive(t, "ep", "acc")
	pl, err := e.hub.dispatch(cmd, []RemoteSession{lapsed})
	if err != nil {
		t.Fatal(err)
	}
	if pl.local != nil || pl.remote != nil || len(pl.copies) != 0 || !pl.lapsed {
		t.Fatalf("plan %+v with only a lost node's session, want none taking it and lapsed", pl)
	}
	e.attachUntil(t, SessionInfo{AgentID: "a", EndpointID: "ep", AccountID: "acc"})
	cmd = e.Receive(t, "ep", "acc")
	pl, err = e.hub.dispatch(cmd, []RemoteSession{lapsed})
	if err != nil {
		t.Fatal(err)
	}
	if pl.local == nil || pl.local.info.AgentID != "a" || pl.remote != nil || len(pl.copies) != 0 {
		t.Fatalf("plan %+v, want a alone, no copy to the lost node's session", pl)
	}
	e.hub.resolve(pl.pending, domain.ForwardOutcome{AttemptID: cmd.AttemptID, Status: 503})
}

// The forwards waiting for a lost node's session's end read the Roster
// again together: one read per Endpoint per poll, not one per forward.
// Each read is a read of the views every account's reads share; 32
// forwards waiting 500 ms with a poll of 25 ms read it about 640 times on
// their own.
func TestWaitingForALostNodeReadsTheRosterOncePerPoll(t *testing.T) {
	const (
		forwards = 32
		poll     = 25 * time.Millisecond
		timeout  = 500 * time.Millisecond
	)
	e := newEnv(t)
	lapsed := RemoteSession{AgentID: "b1", Node: "b", Asked: true, Position: 1 << 40, Ending: true}
	var reads atomic.Int64
	e.hub = NewHub(HubConfig{Recorder: e.hub.rec, Roster: func(string) []RemoteSession {
		reads.Add(1)
		return []RemoteSession{lapsed}
	}})
	e.hub.endPoll = poll
	t.Cleanup(e.hub.Close)
	results := make([]<-chan domain.ForwardOutcome, 0, forwards)
	for range forwards {
		cmd := e.Receive(t, "ep", "acc")
		cmd.Timeout = timeout
		results = append(results, e.forwardInBackground(t, cmd))
	}
	for _, res := range results {
		if out := <-res; out.Status != 503 || out.Error != domain.FailureNoAgent {
			t.Fatalf("outcome %+v, want 503 %s at the timeout", out, domain.FailureNoAgent)
		}
	}
	// Each forward reads it once as it starts; then the waiting ones
	// share a read per poll (a few more for the time the forwards took
	// to start).
	t.Logf("the Roster was read %d times", reads.Load())
	if got, most := reads.Load(), int64(forwards+4*int(timeout/poll)); got > most {
		t.Errorf("the Roster was read %d times, want at most %d", got, most)
	}
}
