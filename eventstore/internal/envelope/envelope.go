package envelope

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// MaxStreamLen bounds a stream name; EventStoreDB and the SQLite index both
// stay fast with short keys, and the relay's names ("delivery-<uuid>") are far
// below it.
const MaxStreamLen = 512

// Validate checks an append before any adapter touches storage. It refuses,
// with a *domain.InvalidInputError:
//   - an empty stream name, one longer than MaxStreamLen, or one starting with
//     "$" (EventStoreDB reserves those for system streams);
//   - an append of no events (it would change nothing and hide a bug);
//   - an event whose ID is not a lowercase canonical UUID (EventStoreDB stores
//     IDs as UUIDs, so any other spelling would not round-trip);
//   - an empty type or one starting with "$" (system event types);
//   - the same ID twice in one append.
func Validate(stream string, events []domain.EventData) error {
	switch {
	case stream == "":
		return &domain.InvalidInputError{Field: "stream", Reason: "empty"}
	case len(stream) > MaxStreamLen:
		return &domain.InvalidInputError{Field: "stream", Reason: fmt.Sprintf("longer than %d bytes", MaxStreamLen)}
	case strings.HasPrefix(stream, "$"):
		return &domain.InvalidInputError{Field: "stream", Reason: `names starting with "$" are reserved`}
	case len(events) == 0:
		return &domain.InvalidInputError{Field: "events", Reason: "none to append"}
	}
	seen := make(map[string]struct{}, len(events))
	for i, e := range events {
		if err := ValidateID(e.ID); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if _, dup := seen[e.ID]; dup {
			return &domain.InvalidInputError{Field: "event ID", Reason: fmt.Sprintf("%s appears twice in one append", e.ID)}
		}
		seen[e.ID] = struct{}{}
		if e.Type == "" {
			return &domain.InvalidInputError{Field: "event type", Reason: fmt.Sprintf("event %d: empty", i)}
		}
		if strings.HasPrefix(e.Type, "$") {
			return &domain.InvalidInputError{Field: "event type", Reason: fmt.Sprintf(`event %d: types starting with "$" are reserved`, i)}
		}
	}
	return nil
}

// ValidateID accepts only the lowercase canonical UUID form, the one
// EventStoreDB hands back, so an ID reads back exactly as it was written.
// It reads the string in place: it runs for every event appended, where
// parsing it and printing it back cost two allocations.
func ValidateID(id string) error {
	if !canonicalUUID(id) {
		return &domain.InvalidInputError{Field: "event ID", Reason: fmt.Sprintf("%q is not a lowercase canonical UUID", id)}
	}
	return nil
}

// canonicalUUID tells the form uuid.UUID.String prints: 36 characters,
// lowercase hex in groups of 8-4-4-4-12 joined by '-'.
func canonicalUUID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := range len(id) {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// EncodeMetadata is the stored form of Metadata: JSON with OccurredAt in UTC
// and nanoseconds (RFC 3339), so the instant survives exactly and reads back
// the same whatever zone the writer ran in.
//
// It is written by hand, byte for byte as json.Marshal wrote it (one
// append per event was 2 % of the relay's CPU through reflection); what the
// fast path does not handle (a year outside 0–9999, which json.Marshal
// refuses) still goes through it.
func EncodeMetadata(m domain.Metadata) ([]byte, error) {
	m.OccurredAt = m.OccurredAt.UTC()
	if y := m.OccurredAt.Year(); y >= 0 && y <= 9999 {
		b := make([]byte, 0, 112+len(m.CorrelationID)+len(m.CausationID))
		b = append(b, `{"schema_version":`...)
		b = strconv.AppendInt(b, int64(m.SchemaVersion), 10)
		b = append(b, `,"occurred_at":"`...)
		b = m.OccurredAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
		if m.CorrelationID != "" {
			b = domain.AppendJSONString(append(b, `,"correlation_id":`...), m.CorrelationID)
		}
		if m.CausationID != "" {
			b = domain.AppendJSONString(append(b, `,"causation_id":`...), m.CausationID)
		}
		return append(b, '}'), nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	return b, nil
}

// DecodeMetadata reverses EncodeMetadata. Empty input is the zero Metadata, so
// events written by other tools into EventStoreDB still read.
func DecodeMetadata(b []byte) (domain.Metadata, error) {
	var m domain.Metadata
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return domain.Metadata{}, fmt.Errorf("decode metadata: %w", err)
	}
	m.OccurredAt = m.OccurredAt.UTC()
	return m, nil
}

// tombstoneIDs derives a tombstone's event ID from its stream's name: a
// stream is deleted at most once, so the ID is unique, needs no random
// source, and is the same whichever adapter wrote it.
var tombstoneIDs = uuid.MustParse("6f1c8a52-2d9e-4c57-9a0e-3b7f0c1d5e41")

// Tombstone is the event an adapter's DeleteStream leaves in place of a
// stream's events (domain.TypeStreamDeleted), recorded at now.
func Tombstone(tomb domain.StreamDeleted, now time.Time) (domain.EventData, error) {
	data, err := json.Marshal(tomb)
	if err != nil {
		return domain.EventData{}, fmt.Errorf("encode tombstone of %s: %w", tomb.Stream, err)
	}
	return domain.EventData{
		ID:       uuid.NewSHA1(tombstoneIDs, []byte(tomb.Stream)).String(),
		Type:     domain.TypeStreamDeleted,
		Data:     data,
		Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: now.UTC()},
	}, nil
}
