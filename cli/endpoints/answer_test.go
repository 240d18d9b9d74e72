package endpoints

import (
	"bytes"
	"strings"
	"testing"
)

// TestAnswerShownIsWhatTheSenderGets: the ANSWER of endpoints list and the
// answer line of endpoints show are the status a sender is answered with.
func TestAnswerShownIsWhatTheSenderGets(t *testing.T) {
	own := &AnswerJSON{Status: 200, Body: "ok"}
	tests := []struct {
		name, mode string
		answer     *AnswerJSON
		want       string
	}{
		{"queue by default", "QUEUE", &AnswerJSON{Status: 204}, "202 (queued)"},
		{"queue with its own answer", "QUEUE", own, "200 (0 headers, 2 bytes)"},
		{"log", "LOG", &AnswerJSON{Status: 204}, "204"},
		{"inspector", "", &AnswerJSON{Status: 204}, "204"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeAnswer(tt.mode, tt.answer, nil); got != tt.want {
				t.Errorf("list: describeAnswer = %q, want %q", got, tt.want)
			}
			var show bytes.Buffer
			PrintAnswers(&show, tt.mode, tt.answer, nil)
			if want := "answer:      " + strings.SplitN(tt.want, " (0", 2)[0] + "\n"; !strings.HasPrefix(show.String(), want) {
				t.Errorf("show: %q, want it to start with %q", show.String(), want)
			}
		})
	}
}
