package apiclient

import (
	"encoding/json"
	"reflect"
	"runtime"
	"testing"

	"github.com/relayhq/relay/deliveryjson"
)

// FuzzCheckDecode: CheckDecode ends on any text, whatever it holds, and a
// text it lets through decodes within its budget: what json.Unmarshal
// allocates for it stays under DecodeBudget and the lists' garbage.
func FuzzCheckDecode(f *testing.F) {
	type target struct {
		Data struct {
			Deliveries []deliveryjson.Attempt `json:"deliveries"`
			Names      map[string][]string    `json:"names"`
			Any        any                    `json:"any"`
			Ptr        *struct{ N *int }      `json:"ptr"`
		} `json:"data"`
		Errors []struct {
			Message    string         `json:"message"`
			Extensions map[string]any `json:"extensions"`
		} `json:"errors"`
	}
	for _, seed := range []string{
		`{"data":{"deliveries":[{},{},{}]}}`,
		`{"data":{"names":{"a":["b","c"]},"any":[[],{},1,"x",null]}}`,
		`{"data":{"ptr":{"N":3}},"errors":[{"message":"m","extensions":{"code":"X"}}]}`,
		`{"DATA":{"Deliveries":[{"status":200}]}}`,
		`{"data":{"deliveries":[{]}`,
		`[{"\u0064ata":1}]`,
		``,
		`"\ud800"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v target
		err := CheckDecode(data, &v)
		// Weighed in parts as they arrive, the text weighs the same.
		whole := sizer{data: data}
		whole.value(reflect.TypeOf(&v), 0)
		for _, size := range []int{1, 2, 7} {
			rest := data
			parts := sizer{next: func() []byte {
				if len(rest) == 0 {
					return nil
				}
				p := rest[:min(size, len(rest))]
				rest = rest[len(p):]
				return p
			}}
			parts.value(reflect.TypeOf(&v), 0)
			if parts.cost != whole.cost || parts.pos() != whole.pos() || parts.over != whole.over || parts.bad != whole.bad {
				t.Fatalf("in parts of %d: cost %d at %d (over %v, bad %v), whole: cost %d at %d (over %v, bad %v)", size,
					parts.cost, parts.pos(), parts.over, parts.bad, whole.cost, whole.pos(), whole.over, whole.bad)
			}
		}
		if err != nil {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_ = json.Unmarshal(data, &v)
		runtime.ReadMemStats(&after)
		// Decoding may leave four times a list's size behind while it grows.
		if got, most := int64(after.TotalAlloc-before.TotalAlloc), 4*DecodeBudget(len(data)); got > most {
			t.Errorf("%d bytes of text let through allocated %d bytes decoding, past %d", len(data), got, most)
		}
	})
}
