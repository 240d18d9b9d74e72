// Command gen writes console/typecheck/graphql.d.ts from schema.graphqls;
// go generate runs it in console/typecheck.
package main

import (
	"log"
	"os"

	"github.com/relayhq/relay/console/typecheck"
)

func main() {
	schema, err := os.ReadFile("../../schema.graphqls")
	if err != nil {
		log.Fatal(err)
	}
	out, err := typecheck.Generate(string(schema))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("graphql.d.ts", out, 0o644); err != nil {
		log.Fatal(err)
	}
}
