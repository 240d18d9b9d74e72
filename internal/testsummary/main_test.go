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
	got := summarizeFailed(t, in)
	for _, want := range []string{"c_test.go:1: boom", "FAIL\tp", "ok  \tq", "Skipped", "- caddy is not on PATH: apt-get install caddy\n    p TestA and 1 more"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(got, "-test.shuffle 42") || strings.Contains(got, "-test.shuffle 7") {
		t.Errorf("want the seed of the failed package only:\n%s", got)
	}
	if !strings.HasSuffix(got, "\n1 passed, 1 failed, 2 skipped\n") {
		t.Errorf("want the counts as the last line:\n%s", got)
	}
	if strings.Contains(got, "all good") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
}

// skip, pass and fail build test2json lines for a test of package p.
func skip(test, reason string) string {
	return `{"Action":"output","Package":"p","Test":"` + test + `","Output":"    x_test.go:1: ` + reason + `\n"}` + "\n" +
		`{"Action":"skip","Package":"p","Test":"` + test + `"}` + "\n"
}

func pass(test string) string {
	return `{"Action":"pass","Package":"p","Test":"` + test + `"}` + "\n"
}

func fail(test string) string {
	return `{"Action":"fail","Package":"p","Test":"` + test + `"}` + "\n"
}

// TestSummarizeCounts: the last line counts tests (subtests too, never
// packages); a test reported by two runs counts once, by its last result;
// in CI, a test that skipped for want of a required tool fails the run,
// any other skip does not.
func TestSummarizeCounts(t *testing.T) {
	pkgPass := `{"Action":"pass","Package":"p"}` + "\n"
	for _, tc := range []struct {
		name       string
		in         string
		ci         bool
		wantFailed bool
		wantLast   string
		wantText   string
	}{
		{"passes and a subtest", pass("TestA") + pass("TestA/sub") + pass("TestB") + pkgPass, false, false, "3 passed, 0 failed, 0 skipped", ""},
		{"a failure", pass("TestA") + fail("TestB") + `{"Action":"fail","Package":"p"}` + "\n", false, true, "1 passed, 1 failed, 0 skipped", ""},
		{"skipped then passed in a second run", skip("TestHeap", "heap figures mean nothing under the race detector") + pkgPass + pass("TestHeap") + pkgPass, false, false, "1 passed, 0 failed, 0 skipped", ""},
		{"required tool skipped outside CI", skip("TestCaddy", "caddy is not on PATH: apt-get install caddy") + pkgPass, false, false, "0 passed, 0 failed, 1 skipped", "- caddy is not on PATH"},
		{"chromium skipped in CI", skip("TestConsole", "skipping browser test: no Chromium at /usr/bin/chromium") + pkgPass, true, true, "0 passed, 0 failed, 1 skipped", "p TestConsole: chromium"},
		{"caddy skipped in CI", skip("TestCaddy", "caddy is not on PATH: apt-get install caddy") + pkgPass, true, true, "0 passed, 0 failed, 1 skipped", "p TestCaddy: caddy"},
		{"nats-server skipped in CI", skip("TestLeader", "/usr/sbin/nats-server is not installed (Debian: apt-get install nats-server)") + pkgPass, true, true, "0 passed, 0 failed, 1 skipped", "p TestLeader: nats-server"},
		{"desktop skipped in CI", skip("TestDesktop", "Xvfb is not installed (Debian: apt-get install xvfb)") + pkgPass, true, true, "0 passed, 0 failed, 1 skipped", "p TestDesktop: the desktop agent"},
		{"opt-in skip in CI", skip("TestESDB", "RELAY_EVENTSTORE_URL is not set: set it to an EventStoreDB server") + pass("TestA") + pkgPass, true, false, "1 passed, 0 failed, 1 skipped", "RELAY_EVENTSTORE_URL is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			failed, err := summarize(strings.NewReader(tc.in), &out, tc.ci)
			if err != nil {
				t.Fatal(err)
			}
			if failed != tc.wantFailed {
				t.Errorf("failed = %v, want %v:\n%s", failed, tc.wantFailed, out.String())
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if last := lines[len(lines)-1]; last != tc.wantLast {
				t.Errorf("last line %q, want %q", last, tc.wantLast)
			}
			if !strings.Contains(out.String(), tc.wantText) {
				t.Errorf("output lacks %q:\n%s", tc.wantText, out.String())
			}
		})
	}
}

// TestRequiredMatchesTheTestsSkips: every required tool is matched by the
// skip message its tests give, so the CI check cannot silently miss one.
func TestRequiredMatchesTheTestsSkips(t *testing.T) {
	for _, reason := range []string{
		"skipping browser test: no Chromium at /usr/bin/chromium: not found",
		"caddy is not on PATH: apt-get install caddy (.ci/run does)",
		"/usr/sbin/nats-server is not installed (Debian: apt-get install nats-server)",
		"WebKitGTK 4.1 is not installed (Debian: apt-get install libgtk-3-dev libwebkit2gtk-4.1-dev)",
		"Xvfb is not installed (Debian: apt-get install xvfb)",
		"dbus-daemon is not installed (Debian: apt-get install dbus)",
		"the TypeScript compiler is not installed: (cd console/typecheck && npm ci)",
		"node is not installed, so the TypeScript compiler cannot run (apt-get install nodejs npm)",
	} {
		if _, ok := requiredTool(reason); !ok {
			t.Errorf("%q names no required tool", reason)
		}
	}
	for _, reason := range []string{
		"RELAY_LEADER_LOSS is not set: set it to measure an append stall when a stream leader dies",
		"starts a NATS cluster and four relays",
		"applies 80,000 events",
	} {
		if tool, ok := requiredTool(reason); ok {
			t.Errorf("%q is an opt-in skip, matched as %s", reason, tool)
		}
	}
}

// TestSummarizeTestsWithoutAResult: a package that fails while tests run
// (a panic in a goroutine ends the binary) leaves them without a result;
// their output is printed, as a failed test's is.
func TestSummarizeTestsWithoutAResult(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"panic: boom\n"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"goroutine 7 [running]:\n"}`,
		`{"Action":"output","Package":"q","Test":"TestQ","Output":"still running elsewhere\n"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
	}, "\n")
	got := summarizeFailed(t, in)
	if !strings.Contains(got, "--- NO RESULT: TestA") || !strings.Contains(got, "panic: boom") {
		t.Errorf("a test ended by its package's failure is not shown:\n%s", got)
	}
	if strings.Contains(got, "still running elsewhere") {
		t.Errorf("another package's test is shown:\n%s", got)
	}
}

// summarizeFailed is the summary of the go test -json lines in, which
// must report a failure.
func summarizeFailed(t *testing.T, in string) string {
	t.Helper()
	var out bytes.Buffer
	failed, err := summarize(strings.NewReader(in), &out, false)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	return out.String()
}
