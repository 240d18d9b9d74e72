package agentcli

import (
	"strconv"
	"testing"
)

// TestSentAnswersKeepsTheLastOnes: the record of answers a refusal may
// name holds the last maxSentAnswers and no more, whatever the relay
// answers (here: nothing), keeps no request body, and forgets what it
// hands back.
func TestSentAnswersKeepsTheLastOnes(t *testing.T) {
	var r sentAnswers
	const n = 3*maxSentAnswers + 7
	for i := range n {
		r.add(ForwardEvent{AttemptID: "att-" + strconv.Itoa(i), Method: "POST", Path: "/p" + strconv.Itoa(i), RequestBody: make([]byte, 64),
			RequestHeaders: []Header{{Name: "A", Value: "b"}}})
	}
	if len(r.byID) != maxSentAnswers {
		t.Fatalf("holds %d answers, want the last %d", len(r.byID), maxSentAnswers)
	}
	if _, ok := r.take("att-" + strconv.Itoa(n-maxSentAnswers-1)); ok {
		t.Error("an answer older than the last maxSentAnswers is still held")
	}
	oldest := strconv.Itoa(n - maxSentAnswers)
	ev, ok := r.take("att-" + oldest)
	if !ok || ev.Path != "/p"+oldest || ev.Method != "POST" {
		t.Fatalf("the oldest answer kept: %+v %v", ev, ok)
	}
	if ev.RequestBody != nil || ev.RequestHeaders != nil {
		t.Errorf("kept the request: %d body bytes, %d headers", len(ev.RequestBody), len(ev.RequestHeaders))
	}
	if _, ok := r.take("att-" + oldest); ok {
		t.Error("an answer handed back is still held")
	}
	// Its slot is overwritten in turn without touching the others.
	r.add(ForwardEvent{AttemptID: "att-new"})
	if len(r.byID) != maxSentAnswers {
		t.Errorf("holds %d answers after one taken and one added, want %d", len(r.byID), maxSentAnswers)
	}
}

// TestRefusalOfAnAnswerForgotten: a refusal that comes after its answer
// was forgotten is still told, by the attempt's ID.
func TestRefusalOfAnAnswerForgotten(t *testing.T) {
	obs := &recordingObserver{forwards: make(chan ForwardEvent, 1)}
	s := &session{a: &agent{obs: obs}}
	s.refused("att-9", errAttemptGone)
	ev := <-obs.forwards
	if !ev.ReportOnly || ev.AttemptID != "att-9" || ev.Method != "answer" || ev.Path != "of attempt att-9" || ev.ReportError != errAttemptGone.Error() {
		t.Errorf("told %+v", ev)
	}
}
