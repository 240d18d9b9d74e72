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
