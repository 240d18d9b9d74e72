package projections

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// guestUsage keeps in memory what every guest inspector's deliveries take
// in the log (the sum of inspectors.stored_bytes), in all and per client
// network that created them, so that ingress checks the relay's storage
// for guests (domain.GuestStorage) on every delivery to an inspector
// without a read of the views. It is loaded from the views at open,
// emptied with them, and moved by each committed batch, as the address
// cache is; a network's entry goes when its inspectors hold nothing.
type guestUsage struct {
	mu       sync.Mutex
	total    int64
	networks map[string]int64
}

// load sums the views' inspectors.
func (g *guestUsage) load(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT network, SUM(stored_bytes) FROM inspectors GROUP BY network`)
	if err != nil {
		return fmt.Errorf("sum guests' stored bytes: %w", err)
	}
	defer rows.Close()
	total, networks := int64(0), map[string]int64{}
	for rows.Next() {
		var (
			network string
			n       int64
		)
		if err := rows.Scan(&network, &n); err != nil {
			return fmt.Errorf("sum guests' stored bytes: %w", err)
		}
		total += n
		if network != "" && n != 0 {
			networks[network] = n
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sum guests' stored bytes: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total, g.networks = total, networks
	return nil
}

// moved applies a committed batch's changes, by network ("" for none).
func (g *guestUsage) moved(byNetwork map[string]int64) {
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
func (g *guestUsage) clear() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total, g.networks = 0, nil
}

// GuestStored is what every guest inspector's deliveries take in the log
// as the views have applied them, and what those created from network
// take: ingress's and createInspector's check of the relay's storage for
// guests. Receipts not applied yet are not in it, so requests in flight
// when the whole is reached may pass it, by their own size.
func (v *Addresses) GuestStored(network string) (total, ofNetwork int64) {
	g := &v.guests
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.total, g.networks[network]
}
