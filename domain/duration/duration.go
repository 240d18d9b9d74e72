// Package duration reads the durations every flag and input of the relay
// takes: Go's (90m, 12h, 1h30m) and whole days (30d, 1d12h), since
// retention, lifetimes and look-backs are told in days. One parser, so a
// flag never refuses what another accepts.
package duration

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxDays bounds the days part: 100 years, far from time.Duration's limit
// of about 292 years, so days*24h cannot overflow.
const MaxDays = 36500

const day = 24 * time.Hour

// Parse reads a duration: an optional whole number of days ("30d") then an
// optional Go duration ("12h", "1h30m"), at least one of the two.
func Parse(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration: want one such as 30d, 12h or 90m")
	}
	days, rest := "", s
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		days, rest = s[:i], s[i+1:]
		if days == "" || strings.Trim(days, "0123456789") != "" {
			return 0, fmt.Errorf("%q: want a duration such as 30d, 12h or 90m", s)
		}
	}
	var d time.Duration
	if days != "" {
		n, err := strconv.Atoi(days)
		if err != nil || n > MaxDays {
			return 0, fmt.Errorf("%q: at most %d days", s, MaxDays)
		}
		d = time.Duration(n) * day
	}
	if rest != "" {
		if strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "+") {
			return 0, fmt.Errorf("%q: want a duration such as 30d, 12h or 90m", s)
		}
		r, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("%q: want a duration such as 30d, 12h or 90m", s)
		}
		if r > math.MaxInt64-d {
			return 0, fmt.Errorf("%q: too long", s)
		}
		d += r
	}
	return d, nil
}

// Format writes d as Parse reads it, with whole days as days and no
// trailing zero units: 7d, 1d12h, 1h30m, 1.5s.
func Format(d time.Duration) string {
	var out string
	if d >= day {
		out = strconv.FormatInt(int64(d/day), 10) + "d"
		d %= day
		if d == 0 {
			return out
		}
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return out + s
}

// Flag is a command-line flag (a pflag.Value) that reads with Parse.
type Flag struct{ d *time.Duration }

// NewFlag sets *p to def and returns the flag that sets it.
func NewFlag(p *time.Duration, def time.Duration) *Flag {
	*p = def
	return &Flag{d: p}
}

// Set reads s with Parse.
func (f *Flag) Set(s string) error {
	d, err := Parse(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// String is the value as Parse reads it.
func (f *Flag) String() string {
	if f == nil || f.d == nil {
		return "0s"
	}
	return Format(*f.d)
}

// Type names the value in help: "duration".
func (f *Flag) Type() string { return "duration" }
