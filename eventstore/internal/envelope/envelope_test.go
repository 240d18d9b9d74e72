package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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

// FuzzValidateIDMatchesUUID: ValidateID accepts exactly the strings that
// parse as a UUID and print back the same, which is what it promises.
func FuzzValidateIDMatchesUUID(f *testing.F) {
	for _, id := range []string{goodID, strings.ToUpper(goodID), "{" + goodID + "}", "urn:uuid:" + goodID,
		strings.ReplaceAll(goodID, "-", ""), goodID[:35] + "g", goodID[:8] + "_" + goodID[9:], "", "abc"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		u, err := uuid.Parse(id)
		want := err == nil && u.String() == id
		if got := ValidateID(id) == nil; got != want {
			t.Fatalf("ValidateID(%q) accepts: %v, want %v", id, got, want)
		}
	})
}

// TestValidateIDAllocatesNothing: every event appended is checked.
func TestValidateIDAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = ValidateID(goodID) }); n != 0 {
		t.Fatalf("ValidateID: %.0f allocations, want 0", n)
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

// TestEncodeMetadataMatchesJSON: the hand-written metadata is byte for
// byte what json.Marshal wrote, which the evidence chain and the logs
// written before depend on.
func TestEncodeMetadataMatchesJSON(t *testing.T) {
	at := time.Date(2026, 11, 28, 22, 30, 1, 123456789, time.FixedZone("X", 3600))
	for _, m := range []domain.Metadata{
		{},
		{SchemaVersion: 1, OccurredAt: at},
		{SchemaVersion: 3, OccurredAt: at.Truncate(time.Second), CorrelationID: "0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1", CausationID: "c"},
		{SchemaVersion: -2, OccurredAt: at.Truncate(time.Millisecond), CausationID: "x"},
		{SchemaVersion: 1, OccurredAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{SchemaVersion: 1, OccurredAt: time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC)},
		{SchemaVersion: 1, OccurredAt: at, CorrelationID: `<a href="x">&</a>`, CausationID: "tab\there"},
		{SchemaVersion: 1, OccurredAt: at, CorrelationID: "caf\xe9", CausationID: "\u2028 del\x7f"},
		// Years json.Marshal refuses: the same refusal, through it.
		{SchemaVersion: 1, OccurredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{SchemaVersion: 1, OccurredAt: time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC)},
	} {
		checkMetadataJSON(t, m)
	}
}

// TestEncodeMetadataCoversEveryField: the hand-written encoder knows every
// field of domain.Metadata; one added to the struct fails here until it
// is written (and added to the cases above).
func TestEncodeMetadataCoversEveryField(t *testing.T) {
	known := []string{"SchemaVersion", "OccurredAt", "CorrelationID", "CausationID"}
	typ := reflect.TypeFor[domain.Metadata]()
	var fields []string
	for i := range typ.NumField() {
		fields = append(fields, typ.Field(i).Name)
	}
	if !slices.Equal(fields, known) {
		t.Fatalf("domain.Metadata has fields %v; EncodeMetadata writes %v", fields, known)
	}
}

func FuzzEncodeMetadataMatchesJSON(f *testing.F) {
	f.Add(1, int64(1764369001123456789), "0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1", "")
	f.Add(-1, int64(-62135596800000000), `"<&>"`, "\xff")
	f.Fuzz(func(t *testing.T, version int, nanos int64, correlation, causation string) {
		checkMetadataJSON(t, domain.Metadata{SchemaVersion: version, OccurredAt: time.Unix(0, nanos), CorrelationID: correlation, CausationID: causation})
	})
}

func checkMetadataJSON(t *testing.T, m domain.Metadata) {
	t.Helper()
	u := m
	u.OccurredAt = u.OccurredAt.UTC()
	want, wantErr := json.Marshal(u)
	got, err := EncodeMetadata(m)
	if (err != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
		t.Fatalf("metadata %+v:\n got %s (%v)\nwant %s (%v)", m, got, err, want, wantErr)
	}
}

func BenchmarkEncodeMetadata(b *testing.B) {
	m := domain.Metadata{SchemaVersion: 1, OccurredAt: time.Now(), CorrelationID: goodID, CausationID: goodID}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeMetadata(m); err != nil {
			b.Fatal(err)
		}
	}
}
