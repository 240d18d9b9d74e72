package domain

import (
	"fmt"
	"testing"
)

// TestPrepareScansTheBodyOnce: the JSON paths of many filter lists (a
// delivery matched against every listener of an Endpoint) are looked up in
// one pass over the body per MaxJSONScanPaths distinct paths, and matching
// afterwards scans nothing more; a path no list named costs a pass of its own.
func TestPrepareScansTheBodyOnce(t *testing.T) {
	body := []byte(`{"type":"charge.succeeded","data":{"object":{"status":"paid"}},"n":3}`)
	list := func(from, n int) []Filter {
		var fs []Filter
		for i := from; i < from+n; i++ {
			fs = append(fs, Filter{Kind: FilterJSON, Name: fmt.Sprintf("p%d", i), Values: []string{"x"}})
		}
		return fs
	}
	for _, tt := range []struct {
		name  string
		lists [][]Filter
		scans int
	}{
		{"three listeners, 48 distinct paths", [][]Filter{list(0, 16), list(16, 16), list(32, 16)}, 1},
		{"the same paths in every list", [][]Filter{list(0, 16), list(0, 16), list(0, 16)}, 1},
		{"ten listeners, 160 distinct paths", func() (ls [][]Filter) {
			for i := range 10 {
				ls = append(ls, list(16*i, 16))
			}
			return ls
		}(), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &FilterRequest{Method: "POST", Target: "/", Body: body}
			r.Prepare(tt.lists...)
			for _, fs := range tt.lists {
				Match(fs, r)
			}
			if r.scans != tt.scans {
				t.Fatalf("%d passes over the body, want %d", r.scans, tt.scans)
			}
		})
	}
	r := &FilterRequest{Method: "POST", Target: "/", Body: body}
	if ok, why := Match([]Filter{{Kind: FilterJSON, Name: "data.object.status", Values: []string{"paid"}}}, r); !ok || r.scans != 1 {
		t.Fatalf("match without Prepare: %v %q after %d passes", ok, why, r.scans)
	}
}

// TestHeaderFilterWorkIsBoundedByItsValues: a request with thousands of
// lines of one header, matched against 32 listeners' 16 header filters of
// 32 values each naming it (every filter matching by its last value, on
// the request's last line, so none stops early), costs each filter at most
// 32 lookups once the name has more than setFrom lines, and the lines are
// visited at most twice per request (indexed, then made a set), not once
// per filter or listener. Compared line by line with every value, 7 000
// lines made 114 688 000 comparisons.
func TestHeaderFilterWorkIsBoundedByItsValues(t *testing.T) {
	const listeners = 32
	filters := make([]Filter, MaxFilters)
	for i := range filters {
		vs := make([]string, MaxFilterValues)
		for j := range vs {
			vs[j] = fmt.Sprintf("f%d-%d", i, j)
		}
		vs[len(vs)-1] = "hit"
		filters[i] = Filter{Kind: FilterHeader, Name: "X-Event", Values: vs}
	}
	lists := make([][]Filter, listeners)
	for i := range lists {
		lists[i] = filters
	}
	perFilter := listeners * MaxFilters // filters run per request
	for _, tt := range []struct {
		lines       int
		lookups     int // at most
		linesPassed int // at most
	}{
		{1, perFilter * MaxFilterValues, 1},
		{setFrom, perFilter * setFrom * MaxFilterValues, setFrom},
		{setFrom + 1, perFilter * MaxFilterValues, 2 * (setFrom + 1)},
		{1000, perFilter * MaxFilterValues, 2 * 1000},
		{7000, perFilter * MaxFilterValues, 2 * 7000},
	} {
		t.Run(fmt.Sprintf("%d lines", tt.lines), func(t *testing.T) {
			hs := make([]Header, 0, tt.lines+1)
			for i := range tt.lines - 1 {
				hs = append(hs, Header{Name: "x-event", Value: fmt.Sprint("v", i)})
			}
			hs = append(hs, Header{Name: "X-EVENT", Value: "hit"}, Header{Name: "X-Other", Value: "hit"})
			r := &FilterRequest{Method: "POST", Target: "/", Headers: hs}
			r.Prepare(lists...)
			for _, fs := range lists {
				if ok, why := Match(fs, r); !ok {
					t.Fatalf("no match: %s", why)
				}
			}
			w := r.headerWork
			t.Logf("%d listeners × %d filters of %d values, %d lines: %d lookups, %d lines visited",
				listeners, MaxFilters, MaxFilterValues, tt.lines, w.lookups, w.lines)
			if w.lookups > tt.lookups {
				t.Errorf("%d lookups, want at most %d", w.lookups, tt.lookups)
			}
			if w.lines > tt.linesPassed+1 { // +1: the other header's line
				t.Errorf("%d lines visited, want at most %d", w.lines, tt.linesPassed+1)
			}
		})
	}
}
