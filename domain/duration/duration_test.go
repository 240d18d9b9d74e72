package duration

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1d", 24 * time.Hour, true},
		{"90d", 90 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"12h", 12 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"0", 0, true},
		{" 7d ", 7 * 24 * time.Hour, true},
		{"36500d", MaxDays * 24 * time.Hour, true},
		{"36501d", 0, false},
		{"99999999999999999999d", 0, false},
		{"", 0, false},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"-1d", 0, false},
		{"1d-1h", 0, false},
		{"1dd", 0, false},
		{"1w", 0, false},
		{"soon", 0, false},
	} {
		got, err := Parse(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:        "30s",
		24 * time.Hour:          "1d",
		7 * 24 * time.Hour:      "7d",
		36 * time.Hour:          "1d12h",
		90 * time.Minute:        "1h30m",
		1500 * time.Millisecond: "1.5s",
		0:                       "0s",
	} {
		if got := Format(d); got != want {
			t.Errorf("Format(%v) = %q, want %q", d, got, want)
		}
	}
}

// FuzzParse: whatever Parse accepts, Format writes back to the same value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1d", "1d12h", "90m", "0", "36500d", "-1h", "1d-1h", "d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("Parse(%q) = %v, negative", s, d)
		}
		back, err := Parse(Format(d))
		if err != nil || back != d {
			t.Fatalf("Parse(Format(%v)) = %v, %v", d, back, err)
		}
	})
}
