package closing

import (
	"fmt"

	"github.com/relayhq/relay/domain"
)

// Err reports why a subscription may deliver no more: domain.ErrSubscriptionClosed
// once subClosed is closed, the same wrapped with the reason once storeDone is
// closed, and nil while both are open. The subscription's own Close wins when
// both are, so a caller that closed it sees the plain sentinel.
func Err(subClosed, storeDone <-chan struct{}) error {
	select {
	case <-subClosed:
		return domain.ErrSubscriptionClosed
	default:
	}
	select {
	case <-storeDone:
		return fmt.Errorf("event store closed: %w", domain.ErrSubscriptionClosed)
	default:
		return nil
	}
}
