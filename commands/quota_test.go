package commands

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ratelimit"
)

func TestParseStorageQuota(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "5GiB", want: 5 << 30},
		{in: "500MB", want: 500_000_000},
		{in: " 1KiB ", want: 1 << 10},
		{in: "1PiB", want: 1 << 50},
		{in: "off", want: 0},
		{in: "0", want: 0},
		{in: "unlimited", want: 0},
		{in: "default", want: domain.QuotaDefault},
		{in: "-5GiB", bad: true},
		{in: "-1", bad: true},
		{in: "5Gxx", bad: true},
		{in: "", bad: true},
		{in: "2PiB", bad: true},
		{in: "1EiB", bad: true},
	} {
		got, err := ParseStorageQuota(tc.in)
		var invalid *domain.InvalidInputError
		switch {
		case tc.bad && (err == nil || !errors.As(err, &invalid) || !strings.Contains(err.Error(), "is not a size")):
			t.Errorf("ParseStorageQuota(%q) = %d, %v; want an INVALID_INPUT that says why", tc.in, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("ParseStorageQuota(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseRateQuota(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "100/s", want: "100/s,burst=100"},
		{in: "6000/min,burst=200", want: "6000/min,burst=200"},
		{in: "off", want: "off"},
		{in: "default", want: ""},
		{in: "fast", bad: true},
		{in: "0/s", bad: true},
		{in: "-1/s", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseRateQuota(tc.in)
		switch {
		case tc.bad && !errors.Is(err, domain.ErrInvalidInput):
			t.Errorf("ParseRateQuota(%q) = %q, %v; want INVALID_INPUT", tc.in, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("ParseRateQuota(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseAPICostQuota(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "600000/min", want: "600000/min,burst=600000"},
		{in: "1000/s,burst=20000", want: "1000/s,burst=20000"},
		{in: "off", want: "off"},
		{in: "default", want: ""},
		{in: "-5/min", bad: true},
		{in: "5/min,burst=0", bad: true},
		{in: "lots", bad: true},
	} {
		got, err := ParseAPICostQuota(tc.in)
		var invalid *domain.InvalidInputError
		switch {
		case tc.bad && (!errors.As(err, &invalid) || invalid.Field != "api_cost"):
			t.Errorf("ParseAPICostQuota(%q) = %q, %v; want INVALID_INPUT on api_cost", tc.in, got, err)
		case !tc.bad && (err != nil || got != tc.want):
			t.Errorf("ParseAPICostQuota(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestEffectiveAPICost(t *testing.T) {
	def := QuotaDefaults{APICost: ratelimit.Rate{N: 600_000, Per: time.Minute, Burst: 600_000}}
	for _, tc := range []struct {
		name, override string
		off            bool
		n              int
	}{
		{name: "default", n: 600_000},
		{name: "override", override: "1000/min,burst=5000", n: 1000},
		{name: "off", override: "off", off: true},
		{name: "unreadable falls back to the default", override: "??", n: 600_000},
	} {
		r := EffectiveAPICost(def, tc.override)
		if r.Off() != tc.off || (!tc.off && r.N != tc.n) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
	if r := EffectiveAPICost(QuotaDefaults{}, ""); !r.Off() {
		t.Errorf("no default: %+v, want off", r)
	}
}

func TestEffectiveQuota(t *testing.T) {
	def := QuotaDefaults{Storage: 5 << 30, Rate: ratelimit.Rate{N: 50, Per: 1e9, Burst: 50}}
	for _, tc := range []struct {
		name    string
		storage int64
		rate    string
		want    int64
		off     bool
		n       int
	}{
		{name: "defaults", storage: domain.QuotaDefault, want: 5 << 30, n: 50},
		{name: "override", storage: 1 << 20, rate: "7/s", want: 1 << 20, n: 7},
		{name: "unlimited", storage: 0, rate: "off", want: 0, off: true},
	} {
		st, r := EffectiveQuota(def, tc.storage, tc.rate)
		if st != tc.want || r.Off() != tc.off || (!tc.off && r.N != tc.n) {
			t.Errorf("%s: %d %+v", tc.name, st, r)
		}
	}
}

// FuzzParseQuota: no input panics, and what is accepted reads back the same.
func FuzzParseQuota(f *testing.F) {
	for _, s := range []string{"5GiB", "off", "default", "-1", "1PiB", "100/s", "6000/min,burst=200", "1/h,burst=", "18446744073709551615"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseStorageQuota(s); err == nil && (n < domain.QuotaDefault || n > MaxAccountStorage) {
			t.Fatalf("ParseStorageQuota(%q) = %d, out of range", s, n)
		}
		if r, err := ParseRateQuota(s); err == nil && r != "" {
			if again, err := ParseRateQuota(r); err != nil || again != r {
				t.Fatalf("ParseRateQuota(%q) = %q, which reads back as %q, %v", s, r, again, err)
			}
		}
	})
}
