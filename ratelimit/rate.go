package ratelimit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Rate is N events per Per with bursts of up to Burst. The zero Rate is
// "off": no limit.
type Rate struct {
	N     int
	Per   time.Duration
	Burst int
}

// Off reports whether the rate limits nothing.
func (r Rate) Off() bool { return r.N == 0 }

// Limit is the rate in events per second.
func (r Rate) Limit() rate.Limit {
	if r.Off() {
		return rate.Inf
	}
	return rate.Limit(float64(r.N) / r.Per.Seconds())
}

// RefillTime is how long an empty bucket takes to fill up again.
func (r Rate) RefillTime() time.Duration {
	if r.Off() {
		return 0
	}
	return time.Duration(float64(r.Burst) / float64(r.Limit()) * float64(time.Second))
}

var units = map[string]time.Duration{"s": time.Second, "min": time.Minute, "h": time.Hour}

// String gives the form Parse reads.
func (r Rate) String() string {
	if r.Off() {
		return "off"
	}
	// A period other than the units Parse reads (a fixed rate of the
	// code's, a day say) is written as its duration, shortened: 24h.
	unit := r.Per.String()
	if strings.HasSuffix(unit, "m0s") {
		unit = strings.TrimSuffix(unit, "0s")
	}
	if strings.HasSuffix(unit, "h0m") {
		unit = strings.TrimSuffix(unit, "0m")
	}
	for u, d := range units {
		if d == r.Per {
			unit = u
		}
	}
	return fmt.Sprintf("%d/%s,burst=%d", r.N, unit, r.Burst)
}

// Parse reads "N/UNIT" or "N/UNIT,burst=B" (UNIT s, min or h; B defaults
// to N), or "off". Examples: "10/min,burst=10", "50/s,burst=100".
func Parse(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return Rate{}, nil
	}
	spec, burstPart, hasBurst := strings.Cut(s, ",")
	nPart, unit, ok := strings.Cut(spec, "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want N/UNIT[,burst=B] (UNIT s, min or h) or off, e.g. 10/min,burst=10", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(nPart))
	if err != nil || n <= 0 || n > math.MaxInt32 {
		return Rate{}, fmt.Errorf("rate %q: %q is not a positive count", s, nPart)
	}
	per, ok := units[strings.TrimSpace(unit)]
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: unit %q is not s, min or h", s, unit)
	}
	r := Rate{N: n, Per: per, Burst: n}
	if hasBurst {
		b, ok := strings.CutPrefix(strings.TrimSpace(burstPart), "burst=")
		if !ok {
			return Rate{}, fmt.Errorf("rate %q: want burst=B after the comma", s)
		}
		if r.Burst, err = strconv.Atoi(b); err != nil || r.Burst <= 0 || r.Burst > math.MaxInt32 {
			return Rate{}, fmt.Errorf("rate %q: burst %q is not a positive count", s, b)
		}
	}
	return r, nil
}

// Set and Type make a *Rate a command-line flag (pflag.Value).
func (r *Rate) Set(s string) error {
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Type names the flag's value in help texts.
func (r *Rate) Type() string { return "rate" }
