package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

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

// localTimeLayout is how text output shows a time: to the second, in the
// machine's time zone (JSON output keeps the API's RFC 3339 in UTC).
const localTimeLayout = "2006-01-02 15:04:05"

// localTime turns an API time (RFC 3339) into localTimeLayout; anything
// else is printed as it came.
func localTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.Local().Format(localTimeLayout)
}

// localTimeOr is localTime of *s, or none when s is nil.
func localTimeOr(s *string, none string) string {
	if s == nil {
		return none
	}
	return localTime(*s)
}
