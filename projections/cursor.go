package projections

import (
	"math"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Paging limits of Deliveries.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

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
		pos, err := readmodel.DecodeCursor("after", after)
		if err != nil {
			return 0, 0, err
		}
		before = int64(pos)
	}
	return size, before, nil
}
