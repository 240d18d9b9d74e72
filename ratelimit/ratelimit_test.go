package ratelimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/clientkey"
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

// TestKeyedAllowRateStartsAtItsBurst: a key's new bucket holds the burst
// of the rate given with it, above or below the map's own.
func TestKeyedAllowRateStartsAtItsBurst(t *testing.T) {
	k := NewKeyed(Rate{N: 100, Per: time.Second, Burst: 100}, 10)
	now := time.Unix(1000, 0)
	for _, tt := range []struct {
		key  string
		rate Rate
	}{
		{"big", Rate{N: 100, Per: time.Second, Burst: 1000}},
		{"small", Rate{N: 1, Per: time.Hour, Burst: 3}},
	} {
		passed := 0
		for range 2 * tt.rate.Burst {
			if ok, _ := k.AllowRate(tt.key, tt.rate, now); ok {
				passed++
			}
		}
		if passed != tt.rate.Burst {
			t.Errorf("%s at %s: %d passed at once, want its burst, %d", tt.key, tt.rate, passed, tt.rate.Burst)
		}
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

// anonymousRate is --anonymous-rate's default; anonymousClients the size
// of the relay's map of anonymous clients.
var anonymousRate = Rate{N: 30, Per: time.Hour, Burst: 10}

const anonymousClients = 100_000

// drain asks for key until it is refused, and says how many passed.
func drain(k *Keyed, key string, now time.Time) int {
	n := 0
	for ; n < 1000; n++ {
		if ok, _ := k.Allow(key, now); !ok {
			break
		}
	}
	return n
}

// TestKeyedFloodOfOneNetworkStarvesOnlyIt: an attacker holding two IPv6
// /48s asks as 100 001 clients (/64s), keeps asking every ten minutes and
// drains whatever bucket its newest clients share. Clients of other
// networks arriving meanwhile still get their burst; a new client of the
// attacker's networks does not.
func TestKeyedFloodOfOneNetworkStarvesOnlyIt(t *testing.T) {
	k := NewKeyed(anonymousRate, anonymousClients)
	attacker := make([]string, anonymousClients+1)
	for i := range attacker {
		attacker[i] = clientkey.Of(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff))
	}
	start := time.Unix(1000, 0)
	var refused, asked int
	for step := range 7 { // an hour
		now := start.Add(time.Duration(step) * 10 * time.Minute)
		for _, key := range attacker {
			k.Allow(key, now)
		}
		drain(k, clientkey.Of(fmt.Sprintf("2001:db8:1:%x::1", 0xf000+step)), now)
		for _, victim := range []string{
			clientkey.Of(fmt.Sprintf("2001:db8:ffff:%x::1", step)), // another /48
			clientkey.Of(fmt.Sprintf("198.51.100.%d", 10+step)),    // IPv4
			clientkey.Of(fmt.Sprintf("2a02:c7f:%x::1", step)),      // another ISP's /48
		} {
			asked++
			if ok, _ := k.Allow(victim, now); !ok {
				refused++
			}
		}
		if n := k.Len(); n > anonymousClients {
			t.Fatalf("step %d: the map holds %d buckets, bound %d", step, n, anonymousClients)
		}
	}
	if refused > 0 {
		t.Errorf("%d of %d new clients of other networks refused their first request (the map held %d buckets)", refused, asked, k.Len())
	}
	now := start.Add(time.Hour)
	if ok, _ := k.Allow(clientkey.Of("2001:db8:1:fffe::1"), now); ok {
		t.Error("a new client of the attacker's /48 was given a bucket its network had drained")
	}
}

// TestKeyedFullMapLeavesOtherNetworksTheirBurst: an attacker with enough
// networks to fill the map (100 /48s of 1 000 clients each) and draining
// every bucket it can reach does not take a first request from a client
// of another network.
func TestKeyedFullMapLeavesOtherNetworksTheirBurst(t *testing.T) {
	k := NewKeyed(anonymousRate, anonymousClients)
	now := time.Unix(1000, 0)
	for n := range 100 {
		for c := range 1000 {
			k.Allow(clientkey.Of(fmt.Sprintf("2001:db8:%x:%x::1", n, c)), now)
		}
	}
	for n := range 100 {
		drain(k, clientkey.Of(fmt.Sprintf("2001:db8:%x:ffff::1", n)), now)
	}
	drain(k, "not a client address", now)
	if k.Len() != anonymousClients {
		t.Fatalf("the map holds %d buckets, want it full (%d)", k.Len(), anonymousClients)
	}
	for _, victim := range []string{clientkey.Of("2001:db8:ffff:1::1"), clientkey.Of("198.51.100.7")} {
		if n := drain(k, victim, now); n != anonymousRate.Burst {
			t.Errorf("%s passed %d requests, want its burst of %d", victim, n, anonymousRate.Burst)
		}
	}
}

// TestKeyedBucketsFullAgainMakeRoom: a key that spends a token now and
// then keeps no bucket once it is full again (as a new one would be),
// however recently it asked: 100 keys asking every five minutes at
// 1/min, burst 10, leave room for a newcomer four minutes after they
// asked, though the overflow bucket was just drained.
func TestKeyedBucketsFullAgainMakeRoom(t *testing.T) {
	k := NewKeyed(Rate{N: 1, Per: time.Minute, Burst: 10}, 100)
	start := time.Unix(1000, 0)
	for step := range 3 {
		asked := start.Add(time.Duration(step) * 5 * time.Minute)
		for i := range 100 {
			k.Allow(fmt.Sprint("account-", i), asked)
		}
		later := asked.Add(4 * time.Minute)
		drain(k, fmt.Sprint("drainer-", step), later)
		if ok, _ := k.Allow(fmt.Sprint("newcomer-", step), later); !ok {
			t.Fatalf("step %d: a newcomer refused while every bucket was full again", step)
		}
	}
}

func TestRateString(t *testing.T) {
	for _, tt := range []struct {
		r    Rate
		want string
	}{
		{Rate{N: 50, Per: time.Second, Burst: 100}, "50/s,burst=100"},
		{Rate{N: 6, Per: time.Minute, Burst: 10}, "6/min,burst=10"},
		{Rate{N: 30, Per: time.Hour, Burst: 10}, "30/h,burst=10"},
		{Rate{N: 1, Per: 24 * time.Hour, Burst: 150}, "1/24h,burst=150"},
		{Rate{N: 1, Per: 90 * time.Second, Burst: 1}, "1/1m30s,burst=1"},
		{Rate{}, "off"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.r, got, tt.want)
		}
	}
}
