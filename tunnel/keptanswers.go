package tunnel

import (
	"time"

	"github.com/relayhq/relay/domain"
)

// KeptCopyAnswers bounds, in bytes of headers and body, the answers of
// copies other nodes sent here that a node keeps to answer such a command
// again; one account's at most a quarter, or one answer of any size when
// it keeps none. The sending node records a copy's outcome, and asks
// again only when it heard neither the command's acknowledgement nor its
// reply (a NATS server died under them), and only while it still waits:
// the command's timeout and ReplyGrace. So an answer is kept that long at
// most, and one past the bound is not kept: asked again, the node answers
// 503 domain.FailureCopyAnswerLost. Before, every copy's answer (its body
// up to --max-body) was kept five minutes, uncounted: 32 answers of 1 MiB
// held 32 MiB on the node that ran them (TestKeptCopyAnswersAreBounded).
const KeptCopyAnswers = 16 << 20

// keptAnswers counts the copies' answers kept (receivedCommand.out).
type keptAnswers struct {
	total     int64
	byAccount map[string]int64
	// order holds them in the order kept, each with the time past which
	// nobody asks for it again. Let go of from the front: one of a long
	// timeout there holds back those behind it, within the bound.
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
// asked for again at most until then, when the kept answers have room for
// it. h.mu held.
func (h *Hub) keep(id string, r *receivedCommand, out domain.ForwardOutcome, account string, until, now time.Time) {
	h.letGoKept(now)
	k := &h.kept
	n := answerSize(out)
	held := k.byAccount[account]
	if k.total+n > KeptCopyAnswers || (held > 0 && held+n > KeptCopyAnswers/4) {
		return
	}
	if k.byAccount == nil {
		k.byAccount = map[string]int64{}
	}
	k.total += n
	k.byAccount[account] += n
	r.out, r.kept, r.account = &out, n, account
	k.order = append(k.order, keptAnswer{attemptID: id, until: until})
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
	k := &h.kept
	k.total -= r.kept
	if k.byAccount[r.account] -= r.kept; k.byAccount[r.account] <= 0 {
		delete(k.byAccount, r.account)
	}
	r.out, r.kept, r.account = nil, 0, ""
}
