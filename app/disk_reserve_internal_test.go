package app

import (
	"testing"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/diskreserve"
)

type fullDisk struct{}

func (fullDisk) Space() (diskreserve.Space, error) {
	return diskreserve.Space{Free: 1 << 20, Total: 100 << 30}, nil
}

// TestAnswersBelowTheDiskReserveKeepNoBody: below the reserve, the answers
// of retries, queued attempts and copies already out are recorded without
// their bodies, saying why (the record package keeps the reason given),
// and counted; the views are not even asked.
func TestAnswersBelowTheDiskReserveKeepNoBody(t *testing.T) {
	disk := diskreserve.New(diskreserve.Config{Source: fullDisk{}, Limit: diskreserve.Limit{Bytes: 1 << 30}})
	why := whyNotStored(nil, commands.QuotaDefaults{}, domain.SignupStorage{}, disk)(t.Context(), "acc")
	if why != domain.NotCapturedDiskReserve {
		t.Fatalf("below the reserve: %q, want %q", why, domain.NotCapturedDiskReserve)
	}
	if n := disk.Refusals()[diskreserve.RefusedAnswer]; n != 1 {
		t.Fatalf("answers counted: %d, want 1", n)
	}
}
