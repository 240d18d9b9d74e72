// Command testsummary reads `go test -json` on standard input and prints
// what `go test` prints without it (each package's result, and the whole
// output of the tests that failed), then the tests that were skipped, with
// the reason each gave: what to install or set to run them. It exits 1
// when any test or package failed, so the exit status stays exact.
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
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// summarize copies the results from r to w and lists the skipped tests at
// the end; it reports whether anything failed.
func summarize(r io.Reader, w io.Writer) (failed bool, err error) {
	outputs := map[key][]string{}
	skipped := map[string][]string{} // reason → tests
	seeds := map[string]string{}     // package → its -test.shuffle line
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
				fmt.Fprint(w, strings.Join(outputs[k], ""))
			} else if seed := seeds[e.Package]; seed != "" {
				fmt.Fprint(w, seed)
			}
			delete(outputs, k)
		case "skip":
			if e.Test != "" {
				reason := skipReason(outputs[k])
				skipped[reason] = append(skipped[reason], e.Package+" "+e.Test)
			}
			delete(outputs, k)
		case "pass":
			delete(outputs, k)
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
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
