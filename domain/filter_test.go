package domain

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseFilter(t *testing.T) {
	tests := []struct {
		text    string
		want    Filter
		wantErr string // part of the error; "" for none
	}{
		{"method=POST", Filter{Kind: FilterMethod, Values: []string{"POST"}}, ""},
		{"path=/webhooks/*", Filter{Kind: FilterPath, Values: []string{"/webhooks/*"}}, ""},
		{"header:X-GitHub-Event=push,pull_request", Filter{Kind: FilterHeader, Name: "X-GitHub-Event", Values: []string{"push", "pull_request"}}, ""},
		{"json:data.object.status=succeeded", Filter{Kind: FilterJSON, Name: "data.object.status", Values: []string{"succeeded"}}, ""},
		{" JSON:type = charge.succeeded , invoice.paid", Filter{Kind: FilterJSON, Name: "type", Values: []string{"charge.succeeded", "invoice.paid"}}, ""},
		{"event=charge.succeeded", Filter{Kind: FilterEvent, Values: []string{"charge.succeeded"}}, ""},
		{"method", Filter{}, "no '='"},
		{"colour=red", Filter{}, `unknown kind "colour"`},
		{"header=push", Filter{}, "header needs a name"},
		{"json:=x", Filter{}, "json needs a name"},
		{"json:a..b=x", Filter{}, "empty segment"},
		{"method:x=POST", Filter{}, "takes no name"},
		{"method=", Filter{}, "empty value"},
		{"method=PO ST", Filter{}, "not an HTTP method"},
		{"path=webhooks", Filter{}, "does not start with /"},
		{"path=/a*/b", Filter{}, "may only end"},
		{"header:X Y=1", Filter{}, "not a header name"},
		{"method=" + strings.Repeat("A,", 40) + "A", Filter{}, "values, at most"},
		{"header:X-A=" + strings.Repeat("a", MaxFilterTextSize), Filter{}, "longer than 512 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := ParseFilter(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidInput) {
					t.Fatalf("ParseFilter(%q) error = %v, want one containing %q", tt.text, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFilter(%q): %v", tt.text, err)
			}
			if got.String() != tt.want.String() {
				t.Fatalf("ParseFilter(%q) = %s, want %s", tt.text, got, tt.want)
			}
		})
	}
}

func TestMatchFilters(t *testing.T) {
	stripe := ForwardCommand{Method: "POST", Target: "/webhooks/stripe?x=1",
		Headers: []Header{{Name: "Stripe-Signature", Value: "t=1,v1=x"}, {Name: "Content-Type", Value: "application/json"}},
		Body:    []byte(`{"id":"evt_1","type":"charge.failed","data":{"object":{"status":"failed","amount":42,"items":[{"k":true}]}}}`)}
	github := ForwardCommand{Method: "POST", Target: "/gh",
		Headers: []Header{{Name: "X-GitHub-Event", Value: "push"}, {Name: "X-GitHub-Delivery", Value: "d1"}}, Body: []byte(`{}`)}
	tests := []struct {
		name    string
		cmd     ForwardCommand
		filters []string
		ok      bool
		why     string
	}{
		{"no filter", stripe, nil, true, ""},
		{"method", stripe, []string{"method=post"}, true, ""},
		{"method no", stripe, []string{"method=GET,PUT"}, false, "method=POST not in [GET,PUT]"},
		{"path exact ignores query", stripe, []string{"path=/webhooks/stripe"}, true, ""},
		{"path prefix", stripe, []string{"path=/webhooks/*"}, true, ""},
		{"path no", stripe, []string{"path=/other/*"}, false, "path=/webhooks/stripe not in [/other/*]"},
		{"json", stripe, []string{"json:type=charge.succeeded"}, false, "json type=charge.failed not in [charge.succeeded]"},
		{"json dotted", stripe, []string{"json:data.object.status=failed"}, true, ""},
		{"json number", stripe, []string{"json:data.object.amount=42"}, true, ""},
		{"json index", stripe, []string{"json:data.object.items.0.k=true"}, true, ""},
		{"json absent", stripe, []string{"json:data.nope=x"}, false, "json data.nope absent, wanted [x]"},
		{"json object is no value", stripe, []string{"json:data=x"}, false, "json data absent, wanted [x]"},
		{"event stripe", stripe, []string{"event=charge.failed"}, true, ""},
		{"event github", github, []string{"event=push,pull_request"}, true, ""},
		{"header", github, []string{"header:x-github-event=pull_request,push"}, true, ""},
		{"header no", github, []string{"header:X-GitHub-Event=issues"}, false, "header X-GitHub-Event=push not in [issues]"},
		{"all must match", github, []string{"method=POST", "header:X-GitHub-Event=issues"}, false, "header X-GitHub-Event=push not in [issues]"},
		{"json of a non-JSON body", ForwardCommand{Method: "POST", Target: "/", Body: []byte("a=b")}, []string{"json:a=b"}, false, "json a not examined: body is not JSON, wanted [b]"},
		{"json of a body over the scan limit", ForwardCommand{Method: "POST", Target: "/", Body: append(append([]byte(`{"a":"b","pad":"`), bytes.Repeat([]byte("x"), MaxJSONScanBody)...), `"}`...)}, []string{"json:a=b"}, false, "json a not examined: body larger than 256 KiB, wanted [b]"},
		{"json nested too deep", ForwardCommand{Method: "POST", Target: "/", Body: []byte(`{"a":"b","n":` + strings.Repeat("[", MaxJSONScanDepth) + strings.Repeat("]", MaxJSONScanDepth) + `}`)}, []string{"json:a=b"}, false, "json a not examined: nesting deeper than 64, wanted [b]"},
		{"json nested to the limit", ForwardCommand{Method: "POST", Target: "/", Body: []byte(`{"a":"b","n":` + strings.Repeat("[", MaxJSONScanDepth-1) + strings.Repeat("]", MaxJSONScanDepth-1) + `}`)}, []string{"json:a=b"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := ParseFilters(tt.filters)
			if err != nil {
				t.Fatal(err)
			}
			ok, why := Match(fs, NewFilterRequest(tt.cmd))
			if ok != tt.ok || why != tt.why {
				t.Fatalf("Match(%v) = %v, %q; want %v, %q", tt.filters, ok, why, tt.ok, tt.why)
			}
		})
	}
}

func TestParseFiltersLimit(t *testing.T) {
	texts := make([]string, MaxFilters+1)
	for i := range texts {
		texts[i] = "method=POST"
	}
	if _, err := ParseFilters(texts); err == nil || !strings.Contains(err.Error(), "at most 16") {
		t.Fatalf("ParseFilters of %d filters: %v", len(texts), err)
	}
}

// TestValidateFiltersBounds: filters given as structures (the API's
// input) are held to the bounds of their text form: 16 filters, 32 values,
// 512 bytes each.
func TestValidateFiltersBounds(t *testing.T) {
	values := func(n int) []string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprintf("v%d", i)
		}
		return vs
	}
	filters := func(n int, f Filter) []Filter {
		fs := make([]Filter, n)
		for i := range fs {
			fs[i] = f
		}
		return fs
	}
	post := Filter{Kind: FilterMethod, Values: []string{"POST"}}
	for _, tt := range []struct {
		name    string
		filters []Filter
		wantErr string // "" when valid
	}{
		{"16 filters", filters(16, post), ""},
		{"17 filters", filters(17, post), "17 filters, at most 16"},
		{"32 values", []Filter{{Kind: FilterHeader, Name: "X-A", Values: values(32)}}, ""},
		{"33 values", []Filter{{Kind: FilterHeader, Name: "X-A", Values: values(33)}}, "33 values, at most 32"},
		{"512 bytes", []Filter{{Kind: FilterHeader, Name: "X-A", Values: []string{strings.Repeat("a", 512-len("header:X-A="))}}}, ""},
		{"513 bytes", []Filter{{Kind: FilterHeader, Name: "X-A", Values: []string{strings.Repeat("a", 513-len("header:X-A="))}}}, "longer than 512 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateFilters(tt.filters)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ValidateFilters: %v, want an invalid input containing %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzParseFilter: parsing never panics, a filter it accepts is valid,
// its text form reads back to the same filter, and matching never panics.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"method=POST", "path=/a/*", "header:X-A=1,2", "json:a.b.0=x", "event=push", "=", "json:=", "path=/a*b"} {
		f.Add(s, []byte(`{"a":{"b":["x"]}}`))
	}
	f.Fuzz(func(t *testing.T, text string, body []byte) {
		fl, err := ParseFilter(text)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("ParseFilter(%q) error %v is not invalid input", text, err)
			}
			return
		}
		if err := fl.Validate(); err != nil {
			t.Fatalf("ParseFilter(%q) accepted an invalid filter: %v", text, err)
		}
		again, err := ParseFilter(fl.String())
		if err != nil || again.String() != fl.String() {
			t.Fatalf("round trip of %q: %q, %v", text, again.String(), err)
		}
		Match([]Filter{fl}, NewFilterRequest(ForwardCommand{Method: "POST", Target: "/a/b", Body: body,
			Headers: []Header{{Name: "X-A", Value: "1"}}}))
	})
}

// TestHeaderFilterMatchesNamesInAnyCase: a header filter finds the lines
// of its name however the name is cased, any line matching; lines of one
// name past the few compared one by one are looked up in a set.
func TestHeaderFilterMatchesNamesInAnyCase(t *testing.T) {
	var hs []Header
	for i := range 100 {
		hs = append(hs, Header{Name: "X-Event", Value: fmt.Sprint("v", i)})
	}
	hs = append(hs, Header{Name: "x-kInD", Value: "push"})
	for _, c := range []struct {
		filter string
		ok     bool
		why    string
	}{
		{"header:X-EVENT=v99", true, ""},
		{"header:x-event=v7,zz", true, ""},
		{"header:X-Event=zz", false, "header X-Event= not in [zz]"}, // the lines are too long to show
		{"header:X-Kind=push", true, ""},
		{"header:X-Kind=pull", false, "header X-Kind=push not in [pull]"},
		{"header:X-None=a", false, "header X-None absent, wanted [a]"},
	} {
		f, err := ParseFilter(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		ok, why := Match([]Filter{f}, &FilterRequest{Headers: hs})
		if ok != c.ok || why != c.why {
			t.Errorf("%s: %v %q, want %v %q", c.filter, ok, why, c.ok, c.why)
		}
	}
}
