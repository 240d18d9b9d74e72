package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
)

// Output is the -o/--output flag of a command that prints data: text for
// people, json for scripts (one stable shape per command, docs/cli.md).
type Output struct{ Format string }

// Flags adds -o/--output to fs.
func (o *Output) Flags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Format, "output", "o", "text", "output format: text or json")
}

// Check refuses a format other than text or json (a usage error).
func (o *Output) Check() error {
	switch o.Format {
	case "text", "json":
		return nil
	}
	return Usage(fmt.Errorf("--output %q: want text or json", o.Format))
}

// JSON reports whether -o json was asked for.
func (o *Output) JSON() bool { return o.Format == "json" }

// WriteJSON prints v as indented JSON.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteJSONLine prints v as one line of JSON (streams: tail, listen).
func WriteJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// LocalTimeLayout is how text output shows a time: to the second, in the
// machine's time zone (JSON output keeps the API's RFC 3339 in UTC).
const LocalTimeLayout = "2006-01-02 15:04:05"

// LocalTime turns an API time (RFC 3339) into LocalTimeLayout; anything
// else is printed as it came.
func LocalTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.Local().Format(LocalTimeLayout)
}

// LocalTimeOr is LocalTime of *s, or none when s is nil.
func LocalTimeOr(s *string, none string) string {
	if s == nil {
		return none
	}
	return LocalTime(*s)
}

// WriteList prints list as JSON with -o json, else as a table: header,
// then line(item) for each item, columns separated by tabs.
func WriteList[T any](w io.Writer, out Output, list []T, header string, line func(T) string) error {
	if out.JSON() {
		return WriteJSON(w, list)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, item := range list {
		fmt.Fprintln(tw, line(item))
	}
	return tw.Flush()
}
