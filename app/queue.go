package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/projections"
	"github.com/relayhq/relay/queue"
)

// runQueue drives the QUEUE Endpoints' queues until ctx ends. On several
// nodes only the leader drives them (as the retention sweep), so each
// delivery's schedule has one driver; when the leader goes, the next
// leader finds the schedule in the views (docs/queue.md).
func (a *App) runQueue(ctx context.Context, cfg Config, log *slog.Logger) {
	var leader func() bool
	if a.cluster != nil {
		// A node that has just started has not heard the others yet and
		// takes itself for the leader: it drives no queue before one lease
		// has passed, by when it has heard every live node.
		leases, started := a.cluster.leases, time.Now()
		leader = func() bool { return time.Since(started) > leases.Lease() && leases.Leader() }
	}
	timeout := cfg.Ingress.ForwardTimeout
	d := queue.New(queue.Config{
		Views: a.views, Recorder: a.rec, Forwarder: a.hub, Leader: leader, Logger: log,
		ForwardTimeout: timeout, Poll: cfg.QueuePoll, Bodies: a.bodies,
		Endpoints: a.views.Endpoint,
	})
	_ = d.Run(ctx)
}

// whyNotStored tells why an account may store no more: the relay's disk
// below its reserve, the account's stored bytes at its storage quota, or
// the relay's storage for sign-ups (its network's share) used up when the
// account is in it (commands.StorageRefusal); the one decision behind
// recording the answers of retries, queued attempts and copies without
// their bodies (record.Config.WhyNotStored).
func whyNotStored(views *projections.Runner, quotas commands.QuotaDefaults, signups domain.SignupStorage, disk *diskreserve.Reserve) func(ctx context.Context, accountID string) string {
	return func(ctx context.Context, accountID string) string {
		if disk.State().Level >= diskreserve.Full {
			disk.Refused(diskreserve.RefusedAnswer)
			return domain.NotCapturedDiskReserve
		}
		err := commands.StorageRefusal(ctx, views, quotas, signups, accountID)
		var shared *domain.SharedStorageError
		switch {
		case errors.As(err, &shared):
			return domain.NotCapturedSignupStorage
		case errors.Is(err, domain.ErrStorageQuota):
			return domain.NotCapturedStorageQuota
		}
		return "" // room, or unreadable: the answer is not held up
	}
}
