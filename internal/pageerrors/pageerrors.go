// Package pageerrors names the errors a page in Chromium reports over the
// DevTools protocol, for the browser tests of the console and the desktop
// app: what the page logged with console.error or console.assert, what it
// threw or rejected without a handler, and what the browser itself logged
// at error level (a file that failed to load).
package pageerrors

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
)

// Of returns the error ev reports, or false when ev is no page error.
// Pass it every event of the page's target (chromedp.WithListener).
func Of(ev any) (string, bool) {
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeAssert {
			return "", false
		}
		parts := make([]string, 0, len(e.Args))
		for _, a := range e.Args {
			parts = append(parts, text(a))
		}
		return fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")), true
	case *runtime.EventExceptionThrown:
		// Text is "Uncaught" or "Uncaught (in promise)".
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + text(d.Exception)
		}
		if !strings.Contains(msg, "\n    at ") { // a thrown value without a stack
			msg += fmt.Sprintf(" (at %s:%d:%d)", d.URL, d.LineNumber+1, d.ColumnNumber+1)
		}
		return msg, true
	case *log.EventEntryAdded:
		if e.Entry.Level != log.EntryLevelError {
			return "", false
		}
		return fmt.Sprintf("%s error: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL), true
	}
	return "", false
}

// text is a value the page logged or threw: a string as it is, an error
// with its stack, anything else as the browser describes it.
func text(o *runtime.RemoteObject) string {
	if o.Type == runtime.RemoteObjectTypeString {
		var s string
		if json.Unmarshal(o.Value, &s) == nil {
			return s
		}
	}
	if o.Description != "" {
		return o.Description
	}
	if len(o.Value) > 0 {
		return string(o.Value)
	}
	return string(o.Type)
}
