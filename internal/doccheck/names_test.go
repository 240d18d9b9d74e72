// Package doccheck holds checks that the project's documents name what
// exists.
package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// defined matches a test, benchmark or fuzz target's declaration.
var defined = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)

// named matches a test, benchmark or fuzz target a document names, with
// or without its package, and not a pattern (a trailing *).
var named = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\b(\*)?`)

// declaredTests is the repository's root and the tests, benchmarks and
// fuzz targets its _test.go files declare.
func declaredTests(t *testing.T) (string, map[string]bool) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range defined.FindAllSubmatch(src, -1) {
			have[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the tests: %v", err)
	}
	if !have["TestDocumentsNameTestsThatExist"] {
		t.Fatalf("found %d tests under %s, not this one: the walk is wrong", len(have), root)
	}
	return root, have
}

// TestDocumentsNameTestsThatExist: docs/security.md and its siblings prove
// each bound by naming the test that exceeds it, so a renamed or deleted
// test must not leave a document pointing at nothing. benchmarks.md is a
// journal whose dated sections name the code of their day, and is left out.
func TestDocumentsNameTestsThatExist(t *testing.T) {
	root, have := declaredTests(t)

	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	checked := 0
	for _, doc := range docs {
		if filepath.Base(doc) == "benchmarks.md" {
			continue
		}
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		var missing []string
		seen := map[string]bool{}
		for _, m := range named.FindAllStringSubmatch(string(text), -1) {
			name := m[1]
			if m[2] == "*" || seen[name] {
				continue
			}
			seen[name] = true
			checked++
			if !have[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		for _, name := range missing {
			t.Errorf("%s names %s, which no _test.go declares", strings.TrimPrefix(doc, root+"/"), name)
		}
	}
	if checked < 100 {
		t.Fatalf("the documents named %d tests: the pattern is wrong", checked)
	}
}

// backquoted matches a test or benchmark a document names in backquotes,
// with or without its package: `TestX`, `projections.TestX`.
var backquoted = regexp.MustCompile("`(?:[a-z][a-z0-9_]*\\.)?((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)`")

// TestEveryBoundNamesATest: each row of docs/security.md's first table,
// "Every input and its bound", points to the test that exceeds its bound,
// so a row added without one (or whose only test is gone) fails here.
func TestEveryBoundNamesATest(t *testing.T) {
	root, have := declaredTests(t)
	text, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## Every input and its bound\n")
	if !ok {
		t.Fatal(`docs/security.md has no section "Every input and its bound"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break // the first table ends at its first line that is no row
			}
			continue
		}
		rows = append(rows, line)
	}
	if len(rows) < 30 {
		t.Fatalf("the first table has %d lines: the reading is wrong", len(rows))
	}
	for _, row := range rows[2:] { // the header and its separator
		input, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " |")
		var named []string
		for _, m := range backquoted.FindAllStringSubmatch(row, -1) {
			if have[m[1]] {
				named = append(named, m[1])
			}
		}
		if len(named) == 0 {
			t.Errorf("docs/security.md: the row %q names no test that exists", input)
		}
	}
}
