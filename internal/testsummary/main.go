// Command testsummary reads `go test -json` on standard input and prints
// what `go test` prints without it (each package's result, and the whole
// output of the tests that failed), then the tests that were skipped, with
// the reason each gave: what to install or set to run them, and last one
// line counting tests (subtests included, packages not):
// `N passed, N failed, N skipped`.
//
// It exits 1 when any test or package failed, so the exit status stays
// exact; and, when the environment has CI=true, also when a test skipped
// for want of a tool CI installs (the list is in required.go): there a skip
// hides a broken install.
//
// A test reported twice (a second go test run on the same stream, such as
// the heap check scripts/test runs without -race) counts once, by its last
// result.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

type key struct{ pkg, test string }

func main() {
	failed, err := summarize(os.Stdin, os.Stdout, os.Getenv("CI") == "true")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// result is a test's last outcome, and why it skipped.
type result struct {
	action string // pass, fail or skip
	reason string // for skip
}

// summarize copies the results from r to w, lists the skipped tests and
// ends with the counts; it reports whether the run failed: a test or
// package failed, or, when ci, a test skipped for want of a required tool.
func summarize(r io.Reader, w io.Writer, ci bool) (failed bool, err error) {
	outputs := map[key][]string{}
	results := map[key]result{}
	seeds := map[string]string{} // package → its -test.shuffle line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // build errors and the like are not JSON
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if e.Test == "" {
				// -shuffle=on prints its seed in every package: kept, and
				// printed only for a package that fails (to run it again
				// in the same order).
				if strings.HasPrefix(e.Output, "-test.shuffle ") {
					seeds[e.Package] = e.Output
					continue
				}
				if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "--- ") && e.Output != "PASS\n" {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			outputs[k] = append(outputs[k], e.Output)
		case "fail":
			failed = true
			if e.Test != "" {
				results[k] = result{action: "fail"}
				fmt.Fprint(w, strings.Join(outputs[k], ""))
			} else {
				// A package that failed with tests still running (a panic,
				// a timeout) ends them without a result: their output says
				// why, so it is printed too.
				var running []key
				for t := range outputs {
					if t.pkg == e.Package && t.test != "" {
						running = append(running, t)
					}
				}
				sort.Slice(running, func(i, j int) bool { return running[i].test < running[j].test })
				for _, t := range running {
					fmt.Fprintf(w, "--- NO RESULT: %s (the package ended while it ran)\n%s", t.test, strings.Join(outputs[t], ""))
					delete(outputs, t)
				}
				if seed := seeds[e.Package]; seed != "" {
					fmt.Fprint(w, seed)
				}
			}
			delete(outputs, k)
		case "skip":
			if e.Test != "" {
				results[k] = result{action: "skip", reason: skipReason(outputs[k])}
			}
			delete(outputs, k)
		case "pass":
			if e.Test != "" {
				results[k] = result{action: "pass"}
			}
			delete(outputs, k)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	counts := map[string]int{}
	skipped := map[string][]string{} // reason → tests
	var missing []string             // required tools' skipped tests
	keys := make([]key, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pkg != keys[j].pkg {
			return keys[i].pkg < keys[j].pkg
		}
		return keys[i].test < keys[j].test
	})
	for _, k := range keys {
		res := results[k]
		counts[res.action]++
		if res.action != "skip" {
			continue
		}
		skipped[res.reason] = append(skipped[res.reason], k.pkg+" "+k.test)
		if tool, ok := requiredTool(res.reason); ok {
			missing = append(missing, fmt.Sprintf("%s %s: %s", k.pkg, k.test, tool))
		}
	}
	if len(skipped) > 0 {
		reasons := make([]string, 0, len(skipped))
		for r := range skipped {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		fmt.Fprintln(w, "\nSkipped (what to install or set to run them):")
		for _, r := range reasons {
			tests := skipped[r]
			fmt.Fprintf(w, "- %s\n    %s", r, tests[0])
			if len(tests) > 1 {
				fmt.Fprintf(w, " and %d more", len(tests)-1)
			}
			fmt.Fprintln(w)
		}
	}
	if ci && len(missing) > 0 {
		failed = true
		fmt.Fprintln(w, "\nCI installs these tools, so these tests must run here, yet they skipped:")
		for _, m := range missing {
			fmt.Fprintln(w, "- "+m)
		}
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", counts["pass"], counts["fail"], counts["skip"])
	return failed, nil
}

// skipReason is what the test said when it skipped: its log lines, without
// the runner's own.
func skipReason(lines []string) string {
	var said []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		// "file_test.go:12: reason" → "reason"
		if i := strings.Index(t, ": "); i > 0 && strings.Contains(t[:i], ".go:") {
			t = t[i+2:]
		}
		said = append(said, t)
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, " ")
}
