package tunnel

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/relayhq/relay/domain"
)

// StaleSession is an agent session the log shows open although no process
// holds it (the relay stopped without recording its end).
type StaleSession struct {
	EndpointID string
	AgentID    string
}

// Reasons CloseStale records.
const (
	RelayRestarted = domain.SessionRelayRestarted
)

// CloseStale records AgentDisconnected{Reason: reason} for each session
// (RelayRestarted after a crash, NodeLost for a lost node's), so presence
// read from the log is right again. Sessions attached to this Hub are live
// and skipped, and so are those whose end this Hub is recording (detach):
// an end recorded here too would be a second one, whose later time the
// views would keep.
func (h *Hub) CloseStale(ctx context.Context, sessions []StaleSession, reason string) error {
	var errs []error
	ended := map[string]bool{}
	defer func() {
		// The primary of an Endpoint whose sessions ended is decided again.
		for id := range ended {
			h.reconcilePrimary(ctx, id)
		}
	}()
	for _, s := range sessions {
		h.mu.Lock()
		live, ok := h.byAgent[s.AgentID]
		h.mu.Unlock()
		if ok && live.info.EndpointID == s.EndpointID {
			continue
		}
		if err := h.rec.AgentDisconnected(ctx, s.EndpointID, s.AgentID, reason); err != nil {
			errs = append(errs, fmt.Errorf("close stale agent %s: %w", s.AgentID, err))
			continue
		}
		ended[s.EndpointID] = true
	}
	return errors.Join(errs...)
}

// OpenSessions scans the whole log for sessions connected and never
// disconnected. It reads every event, so it suits startup of the embedded
// store; a presence projection answers the same question without a scan.
func OpenSessions(ctx context.Context, store domain.EventStore, codec *domain.Codec) ([]StaleSession, error) {
	open := map[StaleSession]bool{}
	for after := uint64(0); ; {
		recs, err := store.ReadAll(ctx, after, 512)
		if err != nil {
			return nil, fmt.Errorf("open sessions: %w", err)
		}
		for _, r := range recs {
			after = r.Position
			if r.Type != domain.TypeAgentConnected && r.Type != domain.TypeAgentDisconnected {
				continue
			}
			e, err := codec.Decode(r.Type, r.Data)
			if err != nil {
				return nil, fmt.Errorf("open sessions: %w", err)
			}
			switch e := e.(type) {
			case domain.AgentConnected:
				open[StaleSession{EndpointID: e.EndpointID, AgentID: e.AgentID}] = true
			case domain.AgentDisconnected:
				delete(open, StaleSession{EndpointID: e.EndpointID, AgentID: e.AgentID})
			}
		}
		if len(recs) == 0 {
			break
		}
	}
	out := make([]StaleSession, 0, len(open))
	for s := range open {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].EndpointID != out[j].EndpointID {
			return out[i].EndpointID < out[j].EndpointID
		}
		return out[i].AgentID < out[j].AgentID
	})
	return out, nil
}
