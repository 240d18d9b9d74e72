package record_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/relayhq/relay/domain"
)

// copyOf is the command for a copy of cmd given to agentID, as the tunnel
// makes it.
func copyOf(cmd domain.ForwardCommand, attemptID, agentID string) domain.ForwardCommand {
	cp := cmd
	cp.AttemptID, cp.RequestEventID, cp.RequestRevision = attemptID, "", 0
	cp.Agent, cp.Copy = agentID, true
	return cp
}

// TestCopyReadsOnlyWhatFollows: recording a copy reads the delivery's
// request and the events appended since the state it folded last, never
// the whole stream, so its cost does not grow with the delivery's history:
// the 100th copy of a delivery whose copies answered 16 KiB each reads as
// many events, and about as many bytes, as the 10th.
func TestCopyReadsOnlyWhatFollows(t *testing.T) {
	rec, store := newRecorder(t)
	ctx := t.Context()
	first, queued := receiveForTest(t, rec, "d1")
	if err := queued.Wait(); err != nil {
		t.Fatalf("record receipt: %v", err)
	}
	if _, err := rec.RecordOutcome(ctx, first, domain.ForwardOutcome{AttemptID: first.AttemptID, Status: 200, Body: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	answer := bytes.Repeat([]byte("a"), 16<<10)
	type cost struct{ events, bytes int64 }
	costs := map[int]cost{}
	for i := 1; i <= 100; i++ {
		store.events.Store(0)
		store.bytes.Store(0)
		cp := copyOf(first, fmt.Sprint("copy-", i), "agent-2")
		if _, err := rec.RecordCopy(ctx, cp, "agent-2", domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 200, Body: answer, DurationMs: 1}); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
		costs[i] = cost{store.events.Load(), store.bytes.Load()}
	}
	t.Logf("events (bytes) read to record copy 2: %d (%d), copy 10: %d (%d), copy 100: %d (%d)",
		costs[2].events, costs[2].bytes, costs[10].events, costs[10].bytes, costs[100].events, costs[100].bytes)
	// The bytes differ by the attempts' names ("copy-99" is longer than "copy-9").
	if costs[100].events != costs[10].events || costs[100].bytes > costs[10].bytes+64 {
		t.Fatalf("copy 10 read %d events (%d bytes), copy 100 %d (%d): the cost grows with the delivery's history",
			costs[10].events, costs[10].bytes, costs[100].events, costs[100].bytes)
	}

	// Every copy is in the log once, with its answer.
	events := streamOf(t, store, "d1")
	var copies int
	for _, e := range events {
		if fr, ok := e.(domain.ForwardResponded); ok && fr.Copy {
			copies++
			if !fr.Captured || !bytes.Equal(fr.Body, answer) {
				t.Fatalf("copy %s recorded without its answer", fr.AttemptID)
			}
		}
	}
	if copies != 100 {
		t.Fatalf("%d copies recorded, want 100", copies)
	}
}

// A copy records its agent's receipt beside the digests it kept of its
// request (cmd.Sent); one that kept none records no fidelity rather than
// digests of the request it let go of, which would name every part as
// changed.
func TestCopyRecordsTheDigestsItKept(t *testing.T) {
	rec, store := newRecorder(t)
	ctx := t.Context()
	first, queued := receiveForTest(t, rec, "d1")
	if err := queued.Wait(); err != nil {
		t.Fatalf("record receipt: %v", err)
	}
	sent := domain.DigestRequest(first.Method, first.Target, first.Headers, first.Body)
	receipt := sent
	for _, tc := range []struct {
		attempt string
		sent    *domain.FidelityDigests
	}{
		{"kept", &sent},
		{"none", nil},
	} {
		cp := copyOf(first, tc.attempt, "agent-2")
		cp.Headers, cp.Body, cp.Sent = nil, nil, tc.sent // as the tunnel keeps it
		if _, err := rec.RecordCopy(ctx, cp, "agent-2", domain.ForwardOutcome{AttemptID: cp.AttemptID, Status: 200, DurationMs: 1, Receipt: &receipt}); err != nil {
			t.Fatalf("copy %s: %v", tc.attempt, err)
		}
	}
	got := map[string]*domain.Fidelity{}
	for _, e := range streamOf(t, store, "d1") {
		if fr, ok := e.(domain.ForwardResponded); ok && fr.Copy {
			got[fr.AttemptID] = fr.Fidelity
		}
	}
	if f := got["kept"]; f == nil || *f != (domain.Fidelity{Agent: receipt, Relay: sent}) || len(f.Differences()) != 0 {
		t.Errorf("copy that kept its digests recorded fidelity %+v, want its receipt beside them", f)
	}
	if f, ok := got["none"]; !ok || f != nil {
		t.Errorf("copy that kept no digests recorded fidelity %+v (recorded: %v), want none", f, ok)
	}
}
