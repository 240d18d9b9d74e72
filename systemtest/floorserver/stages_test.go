package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// TestStagesAnswerMediansAndStartOver checks what BenchmarkFloor reads from
// GET /floor/stages: the medians of the waits added since the last read.
func TestStagesAnswerMediansAndStartOver(t *testing.T) {
	var s stages
	e := echo.New()
	e.GET("/floor/stages", s.serve)
	read := func() string {
		t.Helper()
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/floor/stages", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d", rec.Code)
		}
		return rec.Body.String()
	}
	for _, ms := range []time.Duration{3, 1, 2} {
		s.add(ms*time.Millisecond, 10*ms*time.Millisecond)
	}
	if got, want := read(), "n 3\nagent-hop-p50-ms 2.0000\ncommit-p50-ms 20.0000\n"; got != want {
		t.Errorf("first read:\n%s\nwant:\n%s", got, want)
	}
	if got, want := read(), "n 0\nagent-hop-p50-ms 0.0000\ncommit-p50-ms 0.0000\n"; got != want {
		t.Errorf("second read:\n%s\nwant:\n%s", got, want)
	}
	// Past maxStageSamples between two reads, more waits are not kept.
	for range maxStageSamples + 10 {
		s.add(time.Millisecond, time.Millisecond)
	}
	if got, want := read(), fmt.Sprintf("n %d\nagent-hop-p50-ms 1.0000\ncommit-p50-ms 1.0000\n", maxStageSamples); got != want {
		t.Errorf("read past the bound:\n%s\nwant:\n%s", got, want)
	}
}
