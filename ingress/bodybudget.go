package ingress

import (
	"errors"
	"io"
	"sync"

	"github.com/relayhq/relay/internal/clientkey"
)

// DefaultProxyBodyBudget is the memory all request bodies in flight may
// hold at once when Config.ProxyBodyBudget is zero: the bodies forwarded
// (PROXY, QUEUE) and the stored part of those only recorded (inspectors,
// LOG Endpoints) until their record is committed.
const DefaultProxyBodyBudget = 256 << 20

// ErrBodyBudget reports a body refused because the bodies already in
// flight hold the whole budget, or the share of it the body's sender,
// network or account may take (a *BodyBudgetError says which).
var ErrBodyBudget = errors.New("request bodies in flight hold the relay's body budget")

// The shares of the body budget a body may be refused by, as the 503's
// text and the metrics name them (BodyBudgetError.Share).
const (
	ShareRelay   = "relay"   // the whole budget is held
	ShareClient  = "client"  // the sender's address holds its quarter
	ShareNetwork = "network" // the sender's network holds its half
	ShareAccount = "account" // the bodies sent to the account's Endpoints hold its quarter
	ShareReserve = "reserve" // the last quarter, kept for holders of at most a sixteenth
)

// BudgetShares lists the shares, for the metrics.
func BudgetShares() []string {
	return []string{ShareRelay, ShareClient, ShareNetwork, ShareAccount, ShareReserve}
}

// BodyBudgetError is a body the budget refused, with the share that was
// full. It matches ErrBodyBudget.
type BodyBudgetError struct{ Share string }

func (e *BodyBudgetError) Error() string {
	return ErrBodyBudget.Error() + " (" + e.Share + " share full)"
}

// Is makes errors.Is(err, ErrBodyBudget) hold.
func (e *BodyBudgetError) Is(target error) bool { return target == ErrBodyBudget }

// Why is the sender's words for the share: which holder is full, never
// what another holds.
func (e *BodyBudgetError) Why() string {
	switch e.Share {
	case ShareClient:
		return "your client address holds its share of the relay's body budget (a quarter) with bodies still in flight"
	case ShareNetwork:
		return "your client network (IPv4 /24, IPv6 /48) holds its share of the relay's body budget (half) with bodies still in flight"
	case ShareAccount:
		return "the bodies sent to this Endpoint's account hold its share of the relay's body budget (a quarter)"
	case ShareReserve:
		return "the relay's body budget is three quarters full, and its last quarter is kept for senders, networks and accounts that hold at most a sixteenth of it"
	default:
		return "the bodies in flight hold the relay's whole body budget"
	}
}

// BodyBudget is the memory that forwarded bodies, which are held whole
// until the local answer comes back, may take all together: PROXY bodies
// as they arrive, the queue's attempts (queue.Driver) while they are out,
// and copies to other listeners until their frames are written
// (tunnel.Hub). Without it, every sender could hold --max-body, and a hundred of
// them a gigabyte. The composition root makes one and gives it to both.
//
// One key (a client address, an account's queue or its copies) may hold at most a
// quarter of it: bodies are admitted by their declared length, and one that
// declares 10 MiB and trickles holds its share for as long as the body
// timeout allows, so a single client must not be able to take the whole
// budget from everyone. A client address's network (clientkey.Network: an
// IPv4 /24, an IPv6 /48 of 65 536 /64s) may hold at most half of it over
// all its addresses, so one network cannot refuse every other network's
// bodies either; keys that are no address (an account's) have no network.
// The bodies senders send to one account's Endpoints hold at most a
// quarter of it over all their senders (AccountBodyShare), so that one
// account's slow local processes cannot take it with senders from many
// networks.
//
// Those shares alone let two networks, or four accounts, take the whole
// budget. So its last quarter (ReservedBodyShare) is kept for those that
// hold little: a body that would take the bodies in flight past three
// quarters of the budget is admitted only when its client, network and
// account (or its key) would each hold at most a sixteenth of the budget
// (SmallBodyShare, at least one body of --max-body) with it. Any number of
// large holders fill three quarters at most, and a sender that holds
// little still finds room.
type BodyBudget struct {
	total, perClient, perNetwork, perAccount int64
	// oneBody is the most one body's reservation takes: a body of the
	// largest size forwarded (maxBody and the byte past it), which every
	// share holds at least.
	oneBody int64
	// open is what may be held before the reserve (three quarters);
	// small the most a holder may hold to take from the reserve.
	open, small int64

	mu        sync.Mutex
	used      int64
	refused   map[string]int64 // refusals by share, since start
	byClient  map[string]int64 // by client address or key
	byNetwork map[string]int64
	byAccount map[string]int64 // bodies sent to the account's Endpoints
}

// NewBodyBudget makes the budget of total bytes (DefaultProxyBodyBudget
// when 0) in which each key, and the bodies sent to each account's
// Endpoints, may hold a quarter, and at least one body of maxBody
// (DefaultMaxBody when 0), and each client network half; its last quarter
// is kept for holders of at most a sixteenth (at least one body).
func NewBodyBudget(total, maxBody int64) *BodyBudget {
	if total <= 0 {
		total = DefaultProxyBodyBudget
	}
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	return newBodyBudget(total, maxBody)
}

// Total is the budget's size, its default applied.
func (b *BodyBudget) Total() int64 { return b.total }

func newBodyBudget(total, maxBody int64) *BodyBudget {
	return &BodyBudget{
		total:      total,
		oneBody:    maxBody + 1,
		perClient:  max(total/4, maxBody+1),
		perNetwork: max(total/NetworkBodyShare, maxBody+1),
		perAccount: max(total/AccountBodyShare, maxBody+1),
		open:       total - total/ReservedBodyShare,
		small:      max(total/SmallBodyShare, maxBody+1),
		byClient:   map[string]int64{}, byNetwork: map[string]int64{}, byAccount: map[string]int64{},
		refused: map[string]int64{},
	}
}

// NetworkBodyShare: one client network holds at most 1/NetworkBodyShare
// of the body budget, two client addresses' shares: an honest sender's
// /24 still has a quarter of the budget for each of two addresses, and it
// takes two networks, not one, to fill the budget.
const NetworkBodyShare = 2

// AccountBodyShare: the bodies sent to one account's Endpoints (PROXY
// bodies until the primary answers, QUEUE bodies until recorded) hold at
// most 1/AccountBodyShare of the body budget over all their senders, as an
// account's queue attempts and its copies do under their own keys.
const AccountBodyShare = 4

// ReservedBodyShare: the last 1/ReservedBodyShare of the body budget is
// taken only by holders that each hold at most 1/SmallBodyShare of it
// (at least one body of --max-body) with the body they ask room for.
const (
	ReservedBodyShare = 4
	SmallBodyShare    = 16
)

// Reserve takes n bytes of the budget for key (a client address, or an
// account's key: its queue, its copies), or nothing and false when they
// are not there (in all, in the key's share, or in its network's).
func (b *BodyBudget) Reserve(key string, n int64) bool {
	return b.reserve(key, "", n)
}

// Release gives back n bytes key reserved.
func (b *BodyBudget) Release(key string, n int64) {
	b.release(key, "", n)
}

// ReserveFor takes n bytes for client (an address) on behalf of account
// ("": none), each within its share: a message an agent's socket reads,
// held under its address and its account, as PROXY bodies are under
// their sender and the account they are sent to.
func (b *BodyBudget) ReserveFor(client, account string, n int64) bool {
	return b.reserve(client, account, n)
}

// ReleaseFor gives back n bytes ReserveFor took for client and account.
func (b *BodyBudget) ReleaseFor(client, account string, n int64) {
	b.release(client, account, n)
}

// reserve takes n bytes for a body client sent to an Endpoint of account
// ("": a key of no account's Endpoints), or nothing and false when they
// are not there: in all, in the shares of the client, its network or the
// account, or, past the open part of the budget, when one of them would
// hold more than a small share.
func (b *BodyBudget) reserve(client, account string, n int64) bool {
	return b.admit(client, account, n) == ""
}

// admit is reserve, naming the share that refused the body ("" when it
// was admitted), and counting the refusal by it.
func (b *BodyBudget) admit(client, account string, n int64) (full string) {
	if b == nil {
		return ""
	}
	network := clientkey.Network(client)
	b.mu.Lock()
	defer b.mu.Unlock()
	reserved := b.used+n > b.open // the body would take from the reserve
	switch {
	case b.used+n > b.total:
		full = ShareRelay
	case b.byClient[client]+n > b.perClient:
		full = ShareClient
	case network != "" && b.byNetwork[network]+n > b.perNetwork:
		full = ShareNetwork
	case account != "" && b.byAccount[account]+n > b.perAccount:
		full = ShareAccount
	case reserved && (b.byClient[client]+n > b.small || network != "" && b.byNetwork[network]+n > b.small ||
		account != "" && b.byAccount[account]+n > b.small):
		full = ShareReserve
	}
	if full != "" {
		b.refused[full]++
		return full
	}
	b.used += n
	b.byClient[client] += n
	if network != "" {
		b.byNetwork[network] += n
	}
	if account != "" {
		b.byAccount[account] += n
	}
	return ""
}

// Refusals returns the bodies the budget refused since it was made, by
// the share that was full (BudgetShares).
func (b *BodyBudget) Refusals() map[string]int64 {
	out := map[string]int64{}
	for _, share := range BudgetShares() {
		out[share] = 0
	}
	if b == nil {
		return out
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for share, n := range b.refused {
		out[share] = n
	}
	return out
}

// release gives back n bytes reserve took for client and account.
func (b *BodyBudget) release(client, account string, n int64) {
	if b == nil || n <= 0 {
		return
	}
	network := clientkey.Network(client)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	giveBack(b.byClient, client, n)
	if network != "" {
		giveBack(b.byNetwork, network, n)
	}
	if account != "" {
		giveBack(b.byAccount, account, n)
	}
}

// giveBack takes n from what key holds in held, and forgets a key that
// holds nothing.
func giveBack(held map[string]int64, key string, n int64) {
	if held[key] -= n; held[key] <= 0 {
		delete(held, key)
	}
}

// Share is the most one key may hold at once: a quarter of the budget (at
// least one body of --max-body), never more than the whole.
func (b *BodyBudget) Share() int64 { return min(b.perClient, b.total) }

// InUse is the bytes of the budget held now (for tests and metrics).
func (b *BodyBudget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// readBudgeted reads r to its end (r is already limited to most bytes)
// into a buffer whose memory is first reserved from budget, weight bytes
// of budget a byte of buffer, for client and the account whose Endpoint
// the body was sent to. A declared
// length (Content-Length) is reserved whole before anything is read, so
// that senders are admitted one by one: reserving as bytes arrive would
// let many large bodies each take a part of the budget and none finish.
// Without one (chunked), the buffer grows by doubling, each growth
// reserved first. It returns the bytes read, the bytes of budget reserved
// (the caller releases them once done with the body) and a *BodyBudgetError
// (ErrBodyBudget) naming the full share when the budget could not hold
// the body.
func readBudgeted(r io.Reader, budget *BodyBudget, client, account string, most, declared, weight int64) (buf []byte, reserved int64, err error) {
	const first = 32 << 10
	room := min(int64(first), most) // the bytes of buffer reserved
	if declared > 0 {
		// One byte more than declared: a body longer than its claim must
		// still be seen to be (most is maxBody+1 for the same reason).
		room = min(declared+1, most)
	}
	reserved = budget.weighed(room, weight)
	if full := budget.admit(client, account, reserved); full != "" {
		return nil, 0, &BodyBudgetError{Share: full}
	}
	buf = make([]byte, 0, min(int64(first), room))
	for {
		if len(buf) == cap(buf) {
			if int64(cap(buf)) >= most {
				return buf, reserved, nil // r is limited to most bytes
			}
			size := min(2*int64(cap(buf)), most)
			if size > room {
				more := budget.weighed(size, weight) - reserved
				if full := budget.admit(client, account, more); full != "" {
					return buf, reserved, &BodyBudgetError{Share: full}
				}
				room, reserved = size, reserved+more
			}
			next := make([]byte, len(buf), size)
			copy(next, buf)
			buf = next
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF {
			return buf, reserved, nil
		}
		if rerr != nil {
			return buf, reserved, rerr
		}
	}
}

// weighed is the budget n bytes of buffer take at weight bytes a byte, at
// most one body's reservation (oneBody) or the whole budget, so that a body
// every share can hold unweighed is one it can still hold weighed.
func (b *BodyBudget) weighed(n, weight int64) int64 {
	if b == nil || weight <= 1 {
		return n
	}
	return max(min(weight*n, b.oneBody, b.total), n)
}
