package projections

import (
	"testing"
)

// BenchmarkAttemptResponses measures reading attempts' responses from a
// delivery with 25 captured answers of 8 MB (the agent keeps up to 10 MiB):
// two of them as a comparison reads them (bodies over 256 KiB left
// encoded), two with their bodies, and all of them without (a history
// page's statuses).
func BenchmarkAttemptResponses(b *testing.B) {
	e := newEnv(b, Options{})
	const (
		answers = 25
		size    = 8 << 20
	)
	e.retriedWithAnswers("d1", answers, size)
	e.sync(e.views)
	for _, tc := range []struct {
		name    string
		maxBody int64
		only    []string
		want    int
	}{
		// A comparison decodes bodies of up to 256 KiB (compare.MaxStructured).
		{"compare-two", 256 << 10, []string{"a3", "a20"}, 2},
		{"two-with-bodies", MaxAttemptResponseBytes, []string{"a3", "a20"}, 2},
		{"all-without-bodies", 0, nil, answers},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := e.views.AttemptResponses(b.Context(), "d1", tc.maxBody, tc.only...)
				if err != nil || len(got) != tc.want {
					b.Fatalf("read %d responses, %v; want %d", len(got), err, tc.want)
				}
			}
		})
	}
}
