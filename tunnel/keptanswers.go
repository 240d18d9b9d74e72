package tunnel

import (
	"time"

	"github.com/relayhq/relay/domain"
)

// The answers of copies other nodes sent here are kept to answer such a
// command again: the sending node records a copy's outcome, and asks
// again only when it heard neither the command's acknowledgement nor its
// reply (a NATS server died under them), and only while it still waits:
// the command's timeout and ReplyGrace. So an answer is kept that long at
// most, and only as counted in the body budget (HubConfig.Bodies) under
// its account's copies key, as a copy's request and its answer waiting to
// be recorded are: one that finds no room is not kept, and asked again
// the node answers 503 domain.FailureCopyAnswerLost. Before, every copy's
// answer (its body up to --max-body) was kept five minutes, uncounted: 32
// answers of 1 MiB held 32 MiB on the node that ran them
// (TestKeptCopyAnswersAreBounded).

// keptAnswers orders the copies' answers kept (receivedCommand.out), each
// with the time past which nobody asks for it again. They are let go of
// from the front: one of a long timeout there holds back those behind it,
// within the budget.
type keptAnswers struct {
	order []keptAnswer
}

type keptAnswer struct {
	attemptID string
	until     time.Time
}

// answerSize is about the bytes an outcome holds: its headers and body.
func answerSize(out domain.ForwardOutcome) int64 {
	n := int64(len(out.Body) + len(out.Error) + len(out.Failure))
	for _, h := range out.Headers {
		n += int64(len(h.Name) + len(h.Value) + 8)
	}
	return n
}

// keep makes out the answer kept for the copy r (attempt id, of account),
// asked for again at most until then, when the body budget has room for
// it. h.mu held.
func (h *Hub) keep(id string, r *receivedCommand, out domain.ForwardOutcome, account string, until, now time.Time) {
	h.letGoKept(now)
	n := answerSize(out)
	if h.bodies != nil && (n > h.bodies.Share() || !h.bodies.Reserve(copyKey(account), n)) {
		return
	}
	r.out, r.kept, r.account = &out, n, account
	h.kept.order = append(h.kept.order, keptAnswer{attemptID: id, until: until})
}

// letGoKept lets go of the kept answers nobody asks for any more, from
// the oldest. h.mu held.
func (h *Hub) letGoKept(now time.Time) {
	k := &h.kept
	i := 0
	for ; i < len(k.order) && now.After(k.order[i].until); i++ {
		if r := h.received[k.order[i].attemptID]; r != nil {
			h.unkeep(r)
		}
	}
	k.order = k.order[i:]
}

// unkeep lets go of r's kept answer, if it has one. h.mu held.
func (h *Hub) unkeep(r *receivedCommand) {
	if r.out == nil {
		return
	}
	if h.bodies != nil {
		h.bodies.Release(copyKey(r.account), r.kept)
	}
	r.out, r.kept, r.account = nil, 0, ""
}
