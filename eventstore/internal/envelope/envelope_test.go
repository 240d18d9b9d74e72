package envelope

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

const goodID = "5f0c8a9e-2b1d-4c3e-9f10-6a7b8c9d0e1f"

func event(id, typ string) domain.EventData { return domain.EventData{ID: id, Type: typ} }

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		events []domain.EventData
		field  string // "" when the append is valid
	}{
		{"valid", "delivery-1", []domain.EventData{event(goodID, "delivery.received.v1")}, ""},
		{"empty stream", "", []domain.EventData{event(goodID, "t")}, "stream"},
		{"long stream", strings.Repeat("s", MaxStreamLen+1), []domain.EventData{event(goodID, "t")}, "stream"},
		{"system stream", "$all", []domain.EventData{event(goodID, "t")}, "stream"},
		{"no events", "s", nil, "events"},
		{"not a uuid", "s", []domain.EventData{event("abc", "t")}, "event ID"},
		{"uppercase uuid", "s", []domain.EventData{event(strings.ToUpper(goodID), "t")}, "event ID"},
		{"braced uuid", "s", []domain.EventData{event("{"+goodID+"}", "t")}, "event ID"},
		{"empty type", "s", []domain.EventData{event(goodID, "")}, "event type"},
		{"system type", "s", []domain.EventData{event(goodID, "$metadata")}, "event type"},
		{"id twice", "s", []domain.EventData{event(goodID, "t"), event(goodID, "t")}, "event ID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.stream, tt.events)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var invalid *domain.InvalidInputError
			if !errors.As(err, &invalid) || !errors.Is(err, domain.ErrInvalidInput) {
				t.Fatalf("Validate = %v, want an InvalidInputError", err)
			}
			if invalid.Field != tt.field {
				t.Fatalf("field = %q, want %q", invalid.Field, tt.field)
			}
		})
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	zone := time.FixedZone("UTC+05:30", 5*3600+1800)
	tests := []struct {
		name string
		in   domain.Metadata
	}{
		{"zero", domain.Metadata{}},
		{"full", domain.Metadata{
			SchemaVersion: 3,
			OccurredAt:    time.Date(2024, 2, 29, 23, 59, 59, 123456789, zone),
			CorrelationID: "corr",
			CausationID:   "cause",
		}},
		{"monotonic clock reading", domain.Metadata{OccurredAt: time.Now()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := EncodeMetadata(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeMetadata(b)
			if err != nil {
				t.Fatal(err)
			}
			if !got.OccurredAt.Equal(tt.in.OccurredAt) || got.OccurredAt.Location() != time.UTC {
				t.Fatalf("OccurredAt = %v (%v), want %v in UTC", got.OccurredAt, got.OccurredAt.Location(), tt.in.OccurredAt)
			}
			got.OccurredAt, tt.in.OccurredAt = time.Time{}, time.Time{}
			if got != tt.in {
				t.Fatalf("metadata = %+v, want %+v", got, tt.in)
			}
		})
	}
}

func TestDecodeMetadataEmptyAndBroken(t *testing.T) {
	if m, err := DecodeMetadata(nil); err != nil || m != (domain.Metadata{}) {
		t.Fatalf("DecodeMetadata(nil) = %+v, %v", m, err)
	}
	if _, err := DecodeMetadata([]byte("{")); err == nil {
		t.Fatal("DecodeMetadata accepted broken JSON")
	}
}
