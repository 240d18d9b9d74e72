package readmodel_test

import (
	"testing"
	"time"

	"github.com/relayhq/relay/readmodel"
)

func TestInspectorExpiredAt(t *testing.T) {
	expires := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		recorded bool
		now      time.Time
		want     bool
	}{
		{"before the TTL", false, expires.Add(-time.Nanosecond), false},
		{"at the TTL", false, expires, true},
		{"idle past the TTL, expiry not recorded yet", false, expires.Add(time.Hour), true},
		{"expiry recorded", true, expires.Add(-time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := readmodel.Inspector{ExpiresAt: expires, Expired: tt.recorded}
			if got := in.ExpiredAt(tt.now); got != tt.want {
				t.Errorf("ExpiredAt = %v, want %v", got, tt.want)
			}
		})
	}
}
