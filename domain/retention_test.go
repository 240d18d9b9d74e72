package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func TestParseRetention(t *testing.T) {
	limits := domain.RetentionLimits{Default: 30 * 24 * time.Hour, Min: time.Hour, Max: 90 * 24 * time.Hour}
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string // part of the reason; "" for none
	}{
		{"7d", 7 * 24 * time.Hour, ""},
		{" 90d ", 90 * 24 * time.Hour, ""},
		{"36h", 36 * time.Hour, ""},
		{"1h", time.Hour, ""},
		{"91d", 0, "at most the relay's maximum of 90d"},
		{"59m", 0, "at least the relay's minimum of 1h"},
		{"0", 0, "must be positive"},
		{"0d", 0, "must be positive"},
		{"-1d", 0, "must be positive"},
		{"-5h", 0, "must be positive"},
		{"", 0, "must be a duration"},
		{"d", 0, "must be a duration"},
		{"1.5d", 0, "must be a duration"},
		{"+3d", 0, "must be a duration"},
		{"3 days", 0, "must be a duration"},
		{"999999d", 0, "must be a duration"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := domain.ParseRetention(tc.in, limits)
			var inv *domain.InvalidInputError
			switch {
			case tc.err == "" && (err != nil || got != tc.want):
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			case tc.err != "" && (!errors.As(err, &inv) || inv.Field != "retention" || !strings.Contains(inv.Reason, tc.err)):
				t.Fatalf("got %v, %v; want an invalid retention saying %q", got, err, tc.err)
			}
		})
	}
}

func TestRetentionWindow(t *testing.T) {
	l := domain.RetentionLimits{Default: 30 * 24 * time.Hour, Max: 60 * 24 * time.Hour}
	for _, tc := range []struct{ own, want time.Duration }{
		{0, 30 * 24 * time.Hour},
		{time.Hour, time.Hour},
		{90 * 24 * time.Hour, 60 * 24 * time.Hour}, // set before the maximum was lowered
	} {
		if got := l.Window(tc.own); got != tc.want {
			t.Errorf("Window(%v) = %v, want %v", tc.own, got, tc.want)
		}
	}
}

func TestEndpointRetain(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	e, err := domain.NewEndpoint("e1", "a1", "", domain.EndpointSettings{Name: "n", Mode: domain.ModeLog, Retention: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	history := e.Changes()
	e = domain.LoadEndpoint(history)
	if e.Settings().Retention != 7*24*time.Hour {
		t.Fatalf("retention %v after load", e.Settings().Retention)
	}
	for _, tc := range []struct {
		name       string
		now        time.Time
		deliveries int64
		atLeast    bool
		decided    bool
	}{
		{"nothing to remove", now, 0, false, false},
		{"first decision", now, 3, false, true},
		{"same cutoff again", now, 3, false, false},
		{"earlier cutoff", now.Add(-time.Second), 1, false, false},
		{"later cutoff", now.Add(time.Second), 1, false, true},
		{"a count that stopped at its bound", now.Add(2 * time.Second), 1000, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decided, err := e.Retain(time.Hour, tc.now, tc.now.Add(-time.Minute), tc.deliveries, tc.atLeast)
			if err != nil || decided != tc.decided {
				t.Fatalf("Retain = %v, %v; want %v", decided, err, tc.decided)
			}
			changes := e.Changes()
			if !tc.decided {
				if len(changes) != 0 {
					t.Fatalf("raised %v", changes)
				}
				return
			}
			r, ok := changes[len(changes)-1].(domain.EndpointRetained)
			if !ok || r.Cutoff != tc.now.Add(-time.Hour).Format(time.RFC3339Nano) || r.RetentionMs != 3600000 || r.Deliveries != tc.deliveries || r.DeliveriesAtLeast != tc.atLeast {
				t.Fatalf("raised %+v", changes)
			}
			history = append(history, changes...)
			e = domain.LoadEndpoint(history)
		})
	}
	if _, err := e.Retain(0, now, now, 1, false); err == nil {
		t.Fatal("a zero window was accepted")
	}
	if _, err := domain.NewEndpoint("e2", "a1", "", domain.EndpointSettings{Name: "n", Mode: domain.ModeLog, Retention: -time.Second}); err == nil {
		t.Fatal("a negative window was accepted")
	}
}
