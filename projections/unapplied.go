package projections

import "sync"

// maxUnapplied bounds the deliveries the unapplied ledger remembers. It is
// reached only when the views stall for a while under load; the oldest
// entries are then forgotten, so the quotas count a little less than was
// recorded (as they did before the ledger) and memory stays fixed (~64
// bytes an entry).
const maxUnapplied = 1 << 16

// unapplied counts the bytes of deliveries this process recorded that the
// views have not applied yet, by address and by account, so the storage
// quotas ingress checks (Address, AccountQuota) count a delivery from the
// moment its receipt is durable rather than from the views' next batch.
// Without it, every request in the views' linger passes a full quota.
type unapplied struct {
	// mu is read on every request to an Endpoint or inspector (ofAccount,
	// ofAddress) and written once per receipt and per batch.
	mu       sync.RWMutex
	upTo     uint64 // the views' batch being committed or last committed
	entries  []unappliedEntry
	address  map[string]int64
	accounts map[string]int64
}

type unappliedEntry struct {
	position         uint64
	address, account string
	bytes            int64
}

// Recorded notes a delivery's receipt, durable at position in the log,
// storing bytes (its event's payload, what the views count). A position the
// views have already applied, or 0 (unknown), is ignored.
func (u *unapplied) Recorded(address, accountID string, bytes int64, position uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if position == 0 || position <= u.upTo || bytes <= 0 {
		return
	}
	if u.address == nil {
		u.address, u.accounts = map[string]int64{}, map[string]int64{}
	}
	if len(u.entries) >= maxUnapplied {
		u.forget(u.entries[0])
		u.entries = u.entries[1:]
	}
	u.entries = append(u.entries, unappliedEntry{position, address, accountID, bytes})
	u.address[address] += bytes
	if accountID != "" {
		u.accounts[accountID] += bytes
	}
}

// applied drops every delivery at or below last: the views have committed
// the batch that counts them, and their caches count them now. It runs
// after both, so a delivery is never counted by neither (which let a
// request through a full quota while the views' commit was under way); in
// the moment between the caches' update and this it is counted twice, and a
// quota errs towards refusing.
func (u *unapplied) applied(last uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.upTo = max(u.upTo, last)
	kept := u.entries[:0]
	for _, e := range u.entries {
		if e.position <= last {
			u.forget(e)
			continue
		}
		kept = append(kept, e)
	}
	clear(u.entries[len(kept):])
	u.entries = kept
}

// forget takes e out of the sums; u.mu is held.
func (u *unapplied) forget(e unappliedEntry) {
	if u.address[e.address] -= e.bytes; u.address[e.address] <= 0 {
		delete(u.address, e.address)
	}
	if e.account == "" {
		return
	}
	if u.accounts[e.account] -= e.bytes; u.accounts[e.account] <= 0 {
		delete(u.accounts, e.account)
	}
}

// reset forgets everything (the views start again from position 0).
func (u *unapplied) reset() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.upTo, u.entries, u.address, u.accounts = 0, nil, nil, nil
}

func (u *unapplied) ofAddress(id string) int64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.address[id]
}

func (u *unapplied) ofAccount(id string) int64 {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.accounts[id]
}

// Recorded tells the views of a delivery's receipt, durable at position
// in the log and storing bytes, so the storage quotas count it before the
// views apply it (record.Usage).
func (v *Runner) Recorded(address, accountID string, bytes int64, position uint64) {
	v.unapplied.Recorded(address, accountID, bytes, position)
}
