package readmodel

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"

	"github.com/relayhq/relay/domain"
)

// cursorPrefix versions the cursor format; clients treat cursors as opaque.
const cursorPrefix = "d1:"

// EncodeCursor names a delivery by the position of its DeliveryReceived
// event (or a queue entry by its sequence). Positions never change and
// newer deliveries have higher ones, so "older than the cursor" stays the
// same set while new rows arrive: pages neither overlap nor skip.
func EncodeCursor(position uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(position, 10)))
}

// DecodeCursor reads a cursor given in field (named in the error): a
// check of the input alone, which the API makes before it takes from any
// rate.
func DecodeCursor(field, s string) (uint64, error) {
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
