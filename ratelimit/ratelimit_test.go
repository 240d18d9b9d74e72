package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Rate
		bad  bool
	}{
		{in: "10/min", want: Rate{N: 10, Per: time.Minute, Burst: 10}},
		{in: "10/min,burst=20", want: Rate{N: 10, Per: time.Minute, Burst: 20}},
		{in: "50/s,burst=100", want: Rate{N: 50, Per: time.Second, Burst: 100}},
		{in: "3/h", want: Rate{N: 3, Per: time.Hour, Burst: 3}},
		{in: "off", want: Rate{}},
		{in: "", bad: true},
		{in: "10", bad: true},
		{in: "0/s", bad: true},
		{in: "-1/s", bad: true},
		{in: "10/day", bad: true},
		{in: "10/s,burst=0", bad: true},
		{in: "10/s,20", bad: true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("Parse(%q) = %+v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if back, err := Parse(got.String()); err != nil || back != got {
			t.Errorf("Parse(%q.String() = %q) = %+v, %v", tt.in, got.String(), back, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10/min", "10/min,burst=20", "off", "1/s,burst=1", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		if !r.Off() && (r.N <= 0 || r.Burst <= 0 || r.Per <= 0) {
			t.Fatalf("Parse(%q) = %+v", s, r)
		}
		if back, err := Parse(r.String()); err != nil || back != r {
			t.Fatalf("round trip of %q: %+v, %v", s, back, err)
		}
	})
}

func TestKeyedRefusesAfterBurstWithRetryHint(t *testing.T) {
	k := NewKeyed(Rate{N: 6, Per: time.Minute, Burst: 3}, 10)
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := k.Allow("a", now); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, retry := k.Allow("a", now)
	if ok || retry <= 0 || retry > 10*time.Second {
		t.Fatalf("after the burst: ok=%v retry=%s, want refused with a hint up to 10s", ok, retry)
	}
	if ok, _ := k.Allow("b", now); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := k.Allow("a", now.Add(retry)); !ok {
		t.Fatal("refused again after the hinted time")
	}
}

// TestKeyedMapStaysBounded: a flood of keys never grows the map past its
// bound; buckets idle long enough to be full again make room, and keys
// beyond the bound share the overflow bucket.
func TestKeyedMapStaysBounded(t *testing.T) {
	k := NewKeyed(Rate{N: 1, Per: time.Second, Burst: 2}, 100)
	now := time.Unix(1000, 0)
	for i := range 10_000 {
		k.Allow(fmt.Sprint("key-", i), now)
		if n := k.Len(); n > 100 {
			t.Fatalf("map holds %d keys after %d, bound is 100", n, i+1)
		}
	}
	// The overflow bucket is shared: it ran dry long ago.
	if ok, _ := k.Allow("newcomer", now); ok {
		t.Fatal("a key beyond the bound got a full bucket of its own")
	}
	later := now.Add(2 * time.Second) // every bucket is full again
	if ok, _ := k.Allow("newcomer", later); !ok {
		t.Fatal("no room made for a new key once old buckets were idle")
	}
	if n := k.Len(); n != 1 {
		t.Fatalf("after the sweep the map holds %d keys, want 1", n)
	}
}

// TestKeyedAllowRate: each key takes the rate given with it, a changed
// rate applies at once, keys do not share buckets, and an idle bucket is
// swept by its own refill time.
func TestKeyedAllowRate(t *testing.T) {
	k := NewKeyed(Rate{N: 100, Per: time.Second, Burst: 100}, 2)
	now := time.Unix(1000, 0)
	slow := Rate{N: 1, Per: time.Minute, Burst: 2}
	for i := range 2 {
		if ok, _ := k.AllowRate("a", slow, now); !ok {
			t.Fatalf("request %d of a's burst refused", i)
		}
	}
	ok, retry := k.AllowRate("a", slow, now)
	if ok || retry < 59*time.Second || retry > time.Minute {
		t.Fatalf("past a's burst: ok=%v retry=%s, want refused for about a minute", ok, retry)
	}
	if ok, _ := k.AllowRate("b", slow, now); !ok {
		t.Fatal("b shares a's bucket")
	}
	// The operator raises a's rate: from then on its bucket refills at the
	// new rate (what it lacks now is waited for at 10/s, not 1/min).
	fast := Rate{N: 10, Per: time.Second, Burst: 10}
	if ok, retry := k.AllowRate("a", fast, now); ok || retry > 100*time.Millisecond {
		t.Fatalf("a at 10/s with an empty bucket: ok=%v retry=%s, want a wait of at most 100ms", ok, retry)
	}
	if ok, _ := k.AllowRate("a", fast, now.Add(150*time.Millisecond)); !ok {
		t.Fatal("a still refused 150ms after its rate became 10/s")
	}
	if ok, _ := k.AllowRate("a", Rate{}, now); !ok {
		t.Fatal("an off rate refused")
	}
	// b's bucket is idle for its refill time (2 minutes): a new key may take its place.
	later := now.Add(3 * time.Minute)
	k.AllowRate("c", slow, later)
	if n := k.Len(); n > 2 {
		t.Fatalf("map holds %d keys, bound is 2", n)
	}
}

func TestKeyedAllowN(t *testing.T) {
	r := Rate{N: 600, Per: time.Minute, Burst: 100} // 10 tokens a second
	k := NewKeyed(r, 10)
	now := time.Unix(1000, 0)
	steps := []struct {
		name  string
		key   string
		n     int
		after time.Duration // since the previous step
		ok    bool
		retry time.Duration
	}{
		{name: "a full bucket pays 60", key: "a", n: 60, ok: true},
		{name: "40 left pay 40", key: "a", n: 40, ok: true},
		{name: "empty: 20 need 2 s", key: "a", n: 20, retry: 2 * time.Second},
		{name: "a refusal takes nothing", key: "a", n: 10, after: time.Second, ok: true},
		{name: "another key has its own bucket", key: "b", n: 100, ok: true},
		{name: "more than the burst never passes", key: "c", n: 101, retry: 10 * time.Second},
		{name: "and took nothing", key: "c", n: 100, ok: true},
		{name: "zero is free", key: "a", n: 0, ok: true},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		ok, retry := k.AllowN(s.key, r, s.n, now)
		if ok != s.ok || retry != s.retry {
			t.Errorf("%s: AllowN(%q, %d) = %v, %v; want %v, %v", s.name, s.key, s.n, ok, retry, s.ok, s.retry)
		}
	}
	if ok, _ := k.AllowN("a", Rate{}, 1<<30, now); !ok {
		t.Error("an off rate refused")
	}
	// A lower rate for a key applies at once, as in AllowRate.
	low := Rate{N: 60, Per: time.Minute, Burst: 10}
	if ok, retry := k.AllowN("b", low, 11, now.Add(time.Hour)); ok || retry != 10*time.Second {
		t.Errorf("AllowN over the lowered burst = %v, %v; want refused, 10s", ok, retry)
	}
}
