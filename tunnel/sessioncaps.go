package tunnel

import (
	"fmt"

	"github.com/relayhq/relay/domain"
)

// Open agent sessions are capped per Endpoint and per account. Each one
// holds a goroutine, a work queue and a socket's operation on its node,
// and every delivery of its Endpoint walks them all to pick the primary
// and hand out copies; past domain.MaxSnapshotSessions open on one
// Endpoint no listener snapshot is taken, so cold decisions read the
// whole agent stream again. The session rate (graph's DefaultSessionRate)
// bounds how fast sessions start, not how many stay open: a patient
// tenant with many client addresses could hold thousands.
//
//   - per Endpoint, DefaultMaxEndpointSessions: a team's developers, CI
//     and a desktop listening on one Endpoint are a handful; counted
//     across nodes (this node's sessions plus those the views show on the
//     other live nodes, so two nodes starting sessions at the same moment
//     may pass it by one each);
//   - per account, DefaultMaxAccountSessions: a listener on every Endpoint
//     of a busy team; counted per node (N nodes let an account hold N
//     times as many).
//
// Beyond either Attach refuses with a *TooManySessionsError and records
// nothing; a session that ends frees its place at once.
const (
	DefaultMaxEndpointSessions = 64
	DefaultMaxAccountSessions  = 256
)

// SessionCaps bounds the agent sessions open at once; zero fields take
// the defaults.
type SessionCaps struct {
	// PerEndpoint: at most domain.MaxEndpointSessions, so that every open
	// session fits in a snapshot and in the roster's read.
	PerEndpoint int
	PerAccount  int
}

func (c SessionCaps) withDefaults() SessionCaps {
	if c.PerEndpoint <= 0 {
		c.PerEndpoint = DefaultMaxEndpointSessions
	}
	c.PerEndpoint = min(c.PerEndpoint, domain.MaxEndpointSessions)
	if c.PerAccount <= 0 {
		c.PerAccount = DefaultMaxAccountSessions
	}
	return c
}

// TooManySessionsError refuses a session past a cap: Scope is "endpoint"
// or "account", Limit the cap.
type TooManySessionsError struct {
	Scope string
	Limit int
}

func (e *TooManySessionsError) Error() string {
	sessions := fmt.Sprintf("%d agent sessions", e.Limit)
	if e.Limit == 1 {
		sessions = "1 agent session"
	}
	if e.Scope == "endpoint" {
		return fmt.Sprintf("this Endpoint has %s open, the most it may have (relay serve --max-endpoint-sessions); "+
			"end one of its listeners and this one connects on its next try", sessions)
	}
	return fmt.Sprintf("this account has %s open on this relay node, the most it may have (relay serve --max-account-sessions); "+
		"end one of its listeners and this one connects on its next try", sessions)
}

// openCount is how many sessions this node holds, reserved ones included,
// per Endpoint and per account.
type openCount struct {
	byEndpoint, byAccount map[string]int
}

// reserve counts s unless a cap is reached; elsewhere is the Endpoint's
// sessions on other nodes. Called with Hub.mu held.
func (o *openCount) reserve(caps SessionCaps, s SessionInfo, elsewhere int) error {
	if o.byEndpoint == nil {
		o.byEndpoint, o.byAccount = map[string]int{}, map[string]int{}
	}
	if o.byEndpoint[s.EndpointID]+elsewhere >= caps.PerEndpoint {
		return &TooManySessionsError{Scope: "endpoint", Limit: caps.PerEndpoint}
	}
	if o.byAccount[s.AccountID] >= caps.PerAccount {
		return &TooManySessionsError{Scope: "account", Limit: caps.PerAccount}
	}
	o.byEndpoint[s.EndpointID]++
	o.byAccount[s.AccountID]++
	return nil
}

// release uncounts s. Called with Hub.mu held.
func (o *openCount) release(s SessionInfo) {
	dec := func(m map[string]int, k string) {
		if m[k] <= 1 {
			delete(m, k)
		} else {
			m[k]--
		}
	}
	dec(o.byEndpoint, s.EndpointID)
	dec(o.byAccount, s.AccountID)
}
