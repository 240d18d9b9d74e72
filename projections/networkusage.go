package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/relayhq/relay/domain"
)

// networkUsage keeps in memory what a class of the log's owners stores,
// in all and per client network that made them, so that ingress checks a
// relay-wide budget shared by networks on every delivery without a read
// of the views: every guest inspector's stored bytes
// (inspectors.stored_bytes, domain.GuestStorage), and every account's
// made by open sign-up (accounts.stored_bytes, domain.SignupStorage). It
// is loaded from the views at open, emptied with them, and moved by each
// committed batch, as the address cache is; a network's entry goes when
// what it made holds nothing.
type networkUsage struct {
	mu       sync.Mutex
	total    int64
	networks map[string]int64
}

// Sums of the views that load a networkUsage: network, stored bytes.
const (
	qGuestUsage = `SELECT network, SUM(stored_bytes) FROM inspectors GROUP BY network`
	// The accounts in the storage for sign-ups (domain.InSignupStorage).
	qSignupUsage = `SELECT network, SUM(stored_bytes) FROM accounts
		WHERE origin = '` + domain.AccountOriginOpen + `' AND storage_quota = -1 GROUP BY network`
)

// load sums the views' rows by query (qGuestUsage, qSignupUsage).
func (g *networkUsage) load(ctx context.Context, db *sql.DB, query string) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("sum stored bytes by network: %w", err)
	}
	defer rows.Close()
	total, networks := int64(0), map[string]int64{}
	for rows.Next() {
		var (
			network string
			n       int64
		)
		if err := rows.Scan(&network, &n); err != nil {
			return fmt.Errorf("sum stored bytes by network: %w", err)
		}
		total += n
		if network != "" && n != 0 {
			networks[network] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sum stored bytes by network: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total, g.networks = total, networks
	return nil
}

// moved applies a committed batch's changes, by network ("" for none).
func (g *networkUsage) moved(byNetwork map[string]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for network, d := range byNetwork {
		g.total += d
		if network == "" {
			continue
		}
		if g.networks == nil {
			g.networks = map[string]int64{}
		}
		if n := g.networks[network] + d; n != 0 {
			g.networks[network] = n
		} else {
			delete(g.networks, network)
		}
	}
}

// clear empties it (the views were reset).
func (g *networkUsage) clear() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total, g.networks = 0, nil
}

// stored is the whole and network's part of it.
func (g *networkUsage) stored(network string) (total, ofNetwork int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total, g.networks[network]
}

// GuestStored is what every guest inspector's deliveries take in the log
// as the views have applied them, and what those created from network
// take: ingress's and createInspector's check of the relay's storage for
// guests. Receipts not applied yet are not in it, so requests in flight
// when the whole is reached may pass it, by their own size.
func (v *Addresses) GuestStored(network string) (total, ofNetwork int64) {
	return v.guests.stored(network)
}

// SignupStored is what every account in the storage for sign-ups
// (domain.InSignupStorage) takes in the log as the views have applied it,
// and what those network signed up take: ingress's, signUp's and the
// account's settings' check of domain.SignupStorage, read like
// GuestStored.
func (v *Accounts) SignupStored(network string) (total, ofNetwork int64) {
	return v.signups.stored(network)
}

// signupMoves collects a batch's changes of the storage for sign-ups, by
// network ("" for none), from the accounts' rows it updates.
type signupMoves map[string]int64

// storeAccount moves an account's stored bytes and deliveries, and the
// storage for sign-ups with them when the account is in it.
func storeAccount(t *txn, moves signupMoves, id string, bytes, deliveries int64) error {
	row, err := t.queryRow(qAccountStored, bytes, deliveries, id)
	if err != nil {
		return err
	}
	var (
		origin, network string
		quota           int64
	)
	if err := row.Scan(&origin, &network, &quota); errors.Is(err, sql.ErrNoRows) {
		return nil // no such account: nothing stored, as an update of no row
	} else if err != nil {
		return err
	}
	if bytes != 0 && domain.InSignupStorage(origin, quota) {
		moves[network] += bytes
	}
	return nil
}
