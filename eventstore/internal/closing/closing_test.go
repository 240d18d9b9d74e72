package closing

import (
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestErr(t *testing.T) {
	open, closed := make(chan struct{}), make(chan struct{})
	close(closed)
	tests := []struct {
		name              string
		sub, store        chan struct{}
		wantErr, wantWrap bool // wantWrap: the store's reason is in the message
	}{
		{"both open", open, open, false, false},
		{"subscription closed", closed, open, true, false},
		{"store closed", open, closed, true, true},
		{"both closed", closed, closed, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Err(tt.sub, tt.store)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Err = %v, want an error: %v", err, tt.wantErr)
			}
			if !tt.wantErr {
				return
			}
			if !errors.Is(err, domain.ErrSubscriptionClosed) {
				t.Fatalf("Err = %v, want ErrSubscriptionClosed", err)
			}
			if wrapped := err != domain.ErrSubscriptionClosed; wrapped != tt.wantWrap {
				t.Fatalf("Err = %v, wrapped with the store's reason: %v, want %v", err, wrapped, tt.wantWrap)
			}
		})
	}
}
