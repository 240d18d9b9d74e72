package record

import (
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestLeanEventReadsWhatTheCodecWrites: a delivery's state is folded from
// answers decoded without their headers and bodies; the fields it keeps
// are read under the names the codec writes, so a renamed field cannot
// leave an attempt pending for ever.
func TestLeanEventReadsWhatTheCodecWrites(t *testing.T) {
	codec := domain.NewCodec()
	want := domain.ForwardResponded{DeliveryID: "d1", AttemptID: "a1", Copy: true, Status: 200,
		Headers: []domain.Header{{Name: "X", Value: "y"}}, Body: []byte("body"), BodySize: 4, Captured: true}
	ed, err := codec.Encode("e1", want, time.Now(), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{codec: codec}
	got, err := r.leanEvent(domain.RecordedEvent{EventData: domain.EventData{ID: "e1", Type: ed.Type, Data: ed.Data}})
	if err != nil {
		t.Fatal(err)
	}
	fr, ok := got.(domain.ForwardResponded)
	if !ok || fr.DeliveryID != want.DeliveryID || fr.AttemptID != want.AttemptID || fr.Copy != want.Copy || fr.Body != nil {
		t.Fatalf("lean answer %+v, want its delivery, attempt and copy and no body", got)
	}
}
