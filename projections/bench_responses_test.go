package projections

import (
	"testing"
)

// BenchmarkAttemptResponses measures reading attempts' responses from a
// delivery with 25 captured answers of 8 MB (the agent keeps up to 10 MiB):
// two of them with their bodies (a comparison) and all of them without
// (a history page's statuses).
func BenchmarkAttemptResponses(b *testing.B) {
	e := newEnv(b, Options{})
	const (
		answers = 25
		size    = 8 << 20
	)
	e.retriedWithAnswers("d1", answers, size)
	e.sync(e.views)
	for _, tc := range []struct {
		name   string
		bodies bool
		only   []string
		want   int
	}{
		{"compare-two", true, []string{"a3", "a20"}, 2},
		{"all-without-bodies", false, nil, answers},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := e.views.AttemptResponses(b.Context(), "d1", tc.bodies, tc.only...)
				if err != nil || len(got) != tc.want {
					b.Fatalf("read %d responses, %v; want %d", len(got), err, tc.want)
				}
			}
		})
	}
}
