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
	tsc := filepath.Join("node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Skip("the TypeScript compiler is not installed: (cd console/typecheck && npm ci)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed, so the TypeScript compiler cannot run (apt-get install nodejs npm)")
	}
	cmd := exec.Command(node, tsc, "-p", ".", "--pretty", "false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tsc -p console/typecheck: %v\n%s", err, out)
	}
}
