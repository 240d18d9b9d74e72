package projections

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"

	"github.com/relayhq/relay/domain"
)

// Paging limits of Deliveries.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// cursorPrefix versions the cursor format; clients treat cursors as opaque.
const cursorPrefix = "d1:"

// encodeCursor names a delivery by the position of its DeliveryReceived
// event. Positions never change and newer deliveries have higher ones, so
// "older than the cursor" stays the same set while new rows arrive: pages
// neither overlap nor skip.
func encodeCursor(position uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(position, 10)))
}

// decodeCursor reads a cursor given in field (named in the error).
func decodeCursor(field, s string) (uint64, error) {
	invalid := &domain.InvalidInputError{Field: field, Reason: "not a cursor returned by this API"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, invalid
	}
	digits, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok {
		return 0, invalid
	}
	pos, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || pos == 0 || pos > math.MaxInt64 || strconv.FormatUint(pos, 10) != digits {
		return 0, invalid
	}
	return pos, nil
}

// pageBounds validates first and after: first 0 means the default size, a
// larger one is capped; it returns the size and the exclusive upper position.
func pageBounds(first int, after string) (size int, before int64, err error) {
	switch {
	case first < 0:
		return 0, 0, &domain.InvalidInputError{Field: "first", Reason: "must not be negative"}
	case first == 0:
		size = DefaultPageSize
	case first > MaxPageSize:
		size = MaxPageSize
	default:
		size = first
	}
	before = math.MaxInt64
	if after != "" {
		pos, err := decodeCursor("after", after)
		if err != nil {
			return 0, 0, err
		}
		before = int64(pos)
	}
	return size, before, nil
}
