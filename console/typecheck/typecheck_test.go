package typecheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGraphQLTypesCurrent fails when graphql.d.ts no longer matches
// schema.graphqls: the console would be checked against an old API.
func TestGraphQLTypesCurrent(t *testing.T) {
	schema, err := os.ReadFile("../../schema.graphqls")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(string(schema))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("graphql.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("console/typecheck/graphql.d.ts is stale: run go generate ./console/typecheck and commit it")
	}
}

// TestGenerateTypes checks the generator on a small schema: nullability,
// lists, enums, inputs' optional fields.
func TestGenerateTypes(t *testing.T) {
	out, err := Generate(`
scalar Time
enum Mode { LOG PROXY }
"A thing."
type Thing { id: ID! at: Time name: String tags: [String!]! mode: Mode! }
input ThingInput { name: String! mode: Mode }
type Query { thing(id: ID!): Thing }
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"type Mode = 'LOG' | 'PROXY';",
		"/** A thing. */\n  interface Thing {",
		"    id: string;\n",
		"    at: string | null;\n",
		"    tags: Array<string>;\n",
		"    mode: Mode;\n",
		"    name: string;\n    mode?: Mode | null;\n",
		"    thing: Thing | null;\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("generated types lack %q:\n%s", want, out)
		}
	}
	if _, err := Generate(`scalar Money type Query { m: Money }`); err == nil {
		t.Error("a scalar without a TypeScript type was accepted")
	}
}

// TestConsoleTypeChecks runs the TypeScript compiler over the console's
// modules (tsconfig.json): a type error in them fails the test. CI installs
// the pinned compiler (.ci/run: npm ci here); elsewhere the test skips
// without it, and with CI=true the skip fails the run (internal/testsummary).
func TestConsoleTypeChecks(t *testing.T) {
	t.Parallel()
	out, err := runTSC(t, ".")
	if err != nil {
		t.Fatalf("tsc -p console/typecheck: %v\n%s", err, out)
	}
}

// TestTypeCheckFindsErrors shows the check is in force: a module that
// passes a string where format.js wants a number, and reads a field that
// the schema does not have, fails it with both errors.
func TestTypeCheckFindsErrors(t *testing.T) {
	t.Parallel()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	format := filepath.ToSlash(filepath.Join(here, "..", "web", "assets", "format.js"))
	write("bad.js", `// @ts-check
import { formatBytes } from '`+format+`';
formatBytes('12');
/** @param {GQL.Delivery} d */
export const when = (d) => d.recievedAt;
`)
	write("tsconfig.json", `{
  "extends": "`+filepath.ToSlash(filepath.Join(here, "tsconfig.json"))+`",
  "include": ["bad.js", "`+filepath.ToSlash(here)+`/*.d.ts"]
}
`)
	out, err := runTSC(t, dir)
	if err == nil {
		t.Fatalf("tsc passed a module with type errors:\n%s", out)
	}
	for _, want := range []string{
		"bad.js(3,13): error TS2345",                                       // a string for a number
		"bad.js(5,30): error TS2551: Property 'recievedAt' does not exist", // not in schema.graphqls
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tsc output lacks %q:\n%s", want, out)
		}
	}
}

// runTSC runs the pinned TypeScript compiler on the project in dir. It
// skips when the compiler or node is missing (CI installs both).
func runTSC(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	tsc, err := filepath.Abs(filepath.Join("node_modules", "typescript", "bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tsc); err != nil {
		t.Skip("the TypeScript compiler is not installed: (cd console/typecheck && npm ci)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed, so the TypeScript compiler cannot run (apt-get install nodejs npm)")
	}
	return exec.Command(node, tsc, "-p", dir, "--pretty", "false").CombinedOutput()
}
