package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// output is the -o/--output flag of a command that prints data: text for
// people, json for scripts (one stable shape per command, docs/cli.md).
type output struct{ format string }

func (o *output) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.format, "output", "o", "text", "output format: text or json")
}

func (o *output) check() error {
	switch o.format {
	case "text", "json":
		return nil
	}
	return usage(fmt.Errorf("--output %q: want text or json", o.format))
}

func (o *output) json() bool { return o.format == "json" }

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSONLine prints v as one line of JSON (streams: tail, listen).
func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
