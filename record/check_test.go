package record_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// storeWrites are the write methods of domain.EventStore and
// domain.AppendQueuer. Outside the recorder and the store adapters, no
// code calls a method of these names: every write goes through a Recorder,
// whose own methods are named otherwise (Record, Delete, ...).
var storeWrites = map[string]bool{"Append": true, "QueueAppend": true, "AppendQueued": true, "DeleteStream": true}

// writersAllowed are the folders (relative to the module root) whose code
// may write to the store itself: the recorder and the store adapters;
// internal/natstest, which starts NATS servers for tests and checks their
// JetStream with a stream of its own (NATS's DeleteStream, not the log's);
// and internal/logtest, which seeds the stores of several packages' tests
// as their own test files do.
var writersAllowed = []string{"record", "eventstore", "internal/natstest", "internal/logtest"}

// buildersAllowed are the files that may fill in a domain.ForwardCommand:
// its one builder, the bus's decoder, which reads back a command the
// builder made on another node, and the tests' helper that records a
// delivery as ingress does and hands its command to the tunnel's tests.
var buildersAllowed = []string{"record/forward.go", "tunnel/nodebus/wire.go", "internal/logtest/logtest.go"}

// TestOneWriter fails naming every call of a store write method, and every
// forward command built, outside the places allowed above. Test files are
// not checked: they seed stores with the states they test.
func TestOneWriter(t *testing.T) {
	root := moduleRoot(t)
	var offenders []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		offenders = append(offenders, check(fset, rel, f)...)
		return nil
	})
	if err != nil {
		t.Fatalf("walk module: %v", err)
	}
	for _, o := range offenders {
		t.Error(o)
	}
}

// check returns the offending calls and literals of one file.
func check(fset *token.FileSet, rel string, f *ast.File) []string {
	writer := underAny(rel, writersAllowed)
	builder := false
	for _, b := range buildersAllowed {
		builder = builder || rel == b
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && storeWrites[sel.Sel.Name] && !writer {
				out = append(out, fset.Position(n.Pos()).String()+": "+sel.Sel.Name+" writes to the store outside package record; record through a Recorder")
			}
		case *ast.CompositeLit:
			if isForwardCommand(n.Type) && len(n.Elts) > 0 && !builder {
				out = append(out, fset.Position(n.Pos()).String()+": domain.ForwardCommand built outside record.NewForward")
			}
		}
		return true
	})
	return out
}

func isForwardCommand(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name == "ForwardCommand"
	case *ast.Ident:
		return e.Name == "ForwardCommand" // inside package domain
	}
	return false
}

func underAny(rel string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// moduleRoot is the nearest folder above the test's with a go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}
