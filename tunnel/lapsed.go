package tunnel

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// lapsedRosters is the Roster as the commands waiting for the end of a
// lost node's sessions read it again (awaitEnds): each Endpoint's read at
// most once per period, the one read shared by every command waiting on
// it. A Roster read is a read of the views; each of the forwards in flight
// to an Endpoint whose only listener was on the lost node read it every
// period on its own, as many reads as forwards, until the reaper recorded
// the ends (up to a quarter of a lease), holding the views' readers that
// every account's reads share.
type lapsedRosters struct {
	flight singleflight.Group
	mu     sync.Mutex
	last   map[string]lapsedRead
}

// lapsedRead is one Endpoint's Roster and when it was read.
type lapsedRead struct {
	at       time.Time
	sessions []RemoteSession
}

// read returns endpointID's Roster as roster reads it, read again only
// when the last read is period old: the commands waiting on one Endpoint
// share it (read-only: dispatch copies what it keeps of it).
func (l *lapsedRosters) read(endpointID string, period time.Duration, roster func(string) []RemoteSession) []RemoteSession {
	v, _, _ := l.flight.Do(endpointID, func() (any, error) {
		now := time.Now()
		l.mu.Lock()
		last, ok := l.last[endpointID]
		l.mu.Unlock()
		if ok && now.Sub(last.at) < period {
			return last.sessions, nil
		}
		sessions := roster(endpointID)
		now = time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.last == nil {
			l.last = map[string]lapsedRead{}
		}
		// Only the Endpoints with commands waiting now are kept: the map
		// holds those read within the last period.
		for id, r := range l.last {
			if now.Sub(r.at) >= period {
				delete(l.last, id)
			}
		}
		l.last[endpointID] = lapsedRead{at: now, sessions: sessions}
		return sessions, nil
	})
	sessions, _ := v.([]RemoteSession)
	return sessions
}
