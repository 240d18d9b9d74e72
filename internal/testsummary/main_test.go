package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummarize: results pass through, a failed test's output is shown,
// skips are listed at the end with their reasons, grouped, and a failure
// is reported.
func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"output","Package":"p","Output":"-test.shuffle 42\n"}`,
		`{"Action":"output","Package":"q","Output":"-test.shuffle 7\n"}`,
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:9: caddy is not on PATH: apt-get install caddy\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"--- SKIP: TestA (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: caddy is not on PATH: apt-get install caddy\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:1: boom\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Test":"TestD","Output":"all good\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestD"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`{"Action":"output","Package":"q","Output":"ok  \tq\t0.1s\n"}`,
		`{"Action":"pass","Package":"q"}`,
	}, "\n")
	var out bytes.Buffer
	failed, err := summarize(strings.NewReader(in), &out)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	got := out.String()
	for _, want := range []string{"c_test.go:1: boom", "FAIL\tp", "ok  \tq", "Skipped", "- caddy is not on PATH: apt-get install caddy\n    p TestA and 1 more"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "-test.shuffle 42") || strings.Contains(got, "-test.shuffle 7") {
		t.Errorf("want the seed of the failed package only:\n%s", got)
	}
	if strings.Contains(got, "all good") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}
