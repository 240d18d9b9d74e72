package projections

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Addresses is the read model of the addresses the relay answers on:
// guest inspectors, accounts' Endpoints and the agent sessions serving
// them. Ingress resolves an address on every request, so Address keeps the
// rows it read in a cache the runner updates after each commit
// (addrcache.go).
type Addresses struct {
	r     *readPool  // the runner's reader pool
	rs    *readStmts // the runner's hot reads
	cache addressCache
	// listeners keeps OpenListeners' rows (listenerscache.go).
	listeners listenersCache
	// quotas is the Accounts' cache of AccountQuota, which deliveries move.
	quotas *quotaCache
	// unapplied adds an inspector's deliveries the views have not applied
	// yet to its stored bytes.
	unapplied *unapplied
	// guests sums every inspector's stored bytes, in all and per network.
	guests networkUsage
	// signups is the Accounts' sum of the storage for sign-ups, which
	// deliveries move.
	signups *networkUsage
}

// Inspector returns a guest inspector.
func (v *Addresses) Inspector(ctx context.Context, id string) (readmodel.Inspector, error) {
	var (
		i                    readmodel.Inspector
		created, last, ttlMs int64
		answers              string
	)
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Inspector{}, fmt.Errorf("read inspector %q: %w", id, err)
	}
	err = v.r.pointRow(ctx, qctx, v.rs.inspector, id).Scan(&i.ID, &created, &last, &ttlMs, &i.Expired,
		&i.Purged, &i.StoredBytes, &i.Refused, &answers, &i.Smee)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Inspector{}, notFound("inspector", id)
	}
	if err != nil {
		return readmodel.Inspector{}, fmt.Errorf("read inspector %q: %w", id, err)
	}
	if i.Answers, err = decodeAnswers(answers); err != nil {
		return readmodel.Inspector{}, fmt.Errorf("read inspector %q: %w", id, err)
	}
	i.CreatedAt, i.LastActivityAt = fromNanos(created), fromNanos(last)
	i.TTL = time.Duration(ttlMs) * time.Millisecond
	i.ExpiresAt = i.LastActivityAt.Add(i.TTL)
	return i, nil
}

// Address returns the inspector or Endpoint (deleted ones included, with
// Deleted set) whose id is the first label of a public hostname. It runs on
// every public request, so it is served from memory when it can (see
// addrcache.go) and is otherwise one prepared statement (see qAddress).
func (v *Addresses) Address(ctx context.Context, id string) (readmodel.Address, error) {
	pending := v.unapplied.ofAddress(id) // first, as in AccountQuota
	cached, gen, ok := v.cache.get(id)
	if !ok {
		a, err := v.readAddress(ctx, id)
		if err != nil {
			return readmodel.Address{}, err
		}
		v.cache.put(id, a, gen)
		cached = a
	}
	if cached.Kind == domain.AddressInspector {
		cached.StoredBytes += pending // an Endpoint counts in its account
	}
	return cached, nil
}

func (v *Addresses) readAddress(ctx context.Context, id string) (readmodel.Address, error) {
	var (
		a           readmodel.Address
		endpoint    bool
		mode        string
		last, ttlMs int64
		answers     string
		filters     string
	)
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Address{}, fmt.Errorf("read address %q: %w", id, err)
	}
	err = v.r.pointRow(ctx, qctx, v.rs.address, id).Scan(&endpoint, &a.ID, &a.AccountID, &mode, &a.Target,
		&a.ResponseCapture, &a.Deleted, &a.Expired, &last, &ttlMs, &a.StoredBytes, &answers, &filters, &a.Smee, &a.SmeeKeyHash, &a.Network)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Address{}, notFound("address", id)
	}
	if err != nil {
		return readmodel.Address{}, fmt.Errorf("read address %q: %w", id, err)
	}
	if a.Answers, err = decodeAnswers(answers); err != nil {
		return readmodel.Address{}, fmt.Errorf("read address %q: %w", id, err)
	}
	a.LastActivityAt = fromNanos(last)
	if a.Filters, err = parseFilters(filters); err != nil {
		return readmodel.Address{}, fmt.Errorf("read address %q: %w", id, err)
	}
	if endpoint {
		a.Kind, a.Mode = domain.AddressEndpoint, domain.EndpointMode(mode)
		return a, nil
	}
	a.Kind, a.TTL = domain.AddressInspector, time.Duration(ttlMs)*time.Millisecond
	a.ExpiresAt = a.LastActivityAt.Add(a.TTL)
	return a, nil
}

const endpointColumns = `id, account_id, name, mode, target, response_capture, created_at, deleted, refused, filters,
	(SELECT COUNT(*) FROM agent_sessions s WHERE s.endpoint_id = endpoints.id AND s.open = 1), answers, retention_ms, retained_to, smee_key_hash <> '', queue`

func scanEndpoint(row interface{ Scan(...any) error }) (readmodel.Endpoint, error) {
	var (
		e        readmodel.Endpoint
		mode     string
		created  int64
		answers  string
		filters  string
		ms       int64
		retained int64
		queue    string
	)
	if err := row.Scan(&e.ID, &e.AccountID, &e.Name, &mode, &e.Target, &e.ResponseCapture,
		&created, &e.Deleted, &e.Refused, &filters, &e.AgentCount, &answers, &ms, &retained, &e.SmeeKey, &queue); err != nil {
		return readmodel.Endpoint{}, err
	}
	var err error
	if e.Filters, err = parseFilters(filters); err != nil {
		return readmodel.Endpoint{}, err
	}
	if e.Queue, err = parseQueue(queue); err != nil {
		return readmodel.Endpoint{}, err
	}
	if e.Answers, err = decodeAnswers(answers); err != nil {
		return readmodel.Endpoint{}, err
	}
	e.Mode, e.CreatedAt = domain.EndpointMode(mode), fromNanos(created)
	e.Retention = time.Duration(ms) * time.Millisecond
	if retained > 0 {
		e.RetainedTo = fromNanos(retained)
	}
	return e, nil
}

// answersJSON is how the answers column holds an address's own answer
// and handshakes.
type answersJSON struct {
	Answer     *domain.Answer     `json:"answer,omitempty"`
	Handshakes *domain.Handshakes `json:"handshakes,omitempty"`
}

func encodeAnswers(a *domain.Answer, h *domain.Handshakes) (string, error) {
	if a == nil && h == nil {
		return "", nil
	}
	b, err := json.Marshal(answersJSON{a, h})
	if err != nil {
		return "", fmt.Errorf("encode answers: %w", err)
	}
	return string(b), nil
}

func decodeAnswers(s string) (readmodel.Answers, error) {
	if s == "" {
		return readmodel.Answers{}, nil
	}
	var j answersJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return readmodel.Answers{}, fmt.Errorf("decode answers: %w", err)
	}
	return readmodel.Answers{Answer: j.Answer, Handshakes: j.Handshakes}, nil
}

// Endpoints lists an account's Endpoints that are not deleted, oldest
// first: those after the Endpoint after names ("": from the first; one of
// the account's, deleted or not, else domain.ErrNotFound), at most limit
// of them (0: all).
func (v *Addresses) Endpoints(ctx context.Context, accountID, after string, limit int) ([]readmodel.Endpoint, error) {
	from := int64(-1)
	if after != "" {
		err := v.r.QueryRowContext(ctx, "SELECT position FROM endpoints WHERE id = ? AND account_id = ?", after, accountID).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("list endpoints of account %q after %q: %w", accountID, after, domain.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("list endpoints of account %q after %q: %w", accountID, after, err)
		}
	}
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := v.r.QueryContext(ctx, "SELECT "+endpointColumns+
		" FROM endpoints INDEXED BY endpoints_live WHERE account_id = ? AND deleted = 0 AND position > ? ORDER BY position LIMIT ?", accountID, from, limit)
	if err != nil {
		return nil, fmt.Errorf("list endpoints of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.Endpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("list endpoints of account %q: %w", accountID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list endpoints of account %q: %w", accountID, err)
	}
	return out, nil
}

// Endpoint returns an Endpoint; a deleted one is not found. Callers check
// ownership (another account's Endpoint must read as not found too).
func (v *Addresses) Endpoint(ctx context.Context, id string) (readmodel.Endpoint, error) {
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Endpoint{}, fmt.Errorf("read endpoint %q: %w", id, err)
	}
	e, err := scanEndpoint(v.r.pointRow(ctx, qctx, v.rs.endpoint, id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Endpoint{}, notFound("endpoint", id)
	}
	if err != nil {
		return readmodel.Endpoint{}, fmt.Errorf("read endpoint %q: %w", id, err)
	}
	return e, nil
}

// OpenAgentSessions lists sessions that connected and never disconnected, in
// connection order. After a restart none of them is really connected; the
// service records their disconnection at startup, and a cluster's reaper
// reads them every quarter of a lease. It reads agent_sessions_open: none
// of the sessions that ended.
func (v *Addresses) OpenAgentSessions(ctx context.Context) ([]readmodel.AgentSession, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT agent_id, endpoint_id, target, connected_at, node
		FROM agent_sessions INDEXED BY agent_sessions_open WHERE open = 1 ORDER BY position`)
	if err != nil {
		return nil, fmt.Errorf("list open agent sessions: %w", err)
	}
	defer rows.Close()
	out := []readmodel.AgentSession{}
	for rows.Next() {
		var (
			s  readmodel.AgentSession
			at int64
		)
		if err := rows.Scan(&s.AgentID, &s.EndpointID, &s.Target, &at, &s.Node); err != nil {
			return nil, fmt.Errorf("list open agent sessions: %w", err)
		}
		s.ConnectedAt = fromNanos(at)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list open agent sessions: %w", err)
	}
	return out, nil
}

// AgentNodes counts an Endpoint's open agent sessions by the node holding
// them, in node order: where a forward for it can be sent.
func (v *Addresses) AgentNodes(ctx context.Context, endpointID string) ([]readmodel.NodeSessions, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT node, COUNT(*) FROM agent_sessions
		WHERE endpoint_id = ? AND open = 1 GROUP BY node ORDER BY node`, endpointID)
	if err != nil {
		return nil, fmt.Errorf("list agent nodes of endpoint %q: %w", endpointID, err)
	}
	defer rows.Close()
	out := []readmodel.NodeSessions{}
	for rows.Next() {
		var n readmodel.NodeSessions
		if err := rows.Scan(&n.Node, &n.Sessions); err != nil {
			return nil, fmt.Errorf("list agent nodes of endpoint %q: %w", endpointID, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent nodes of endpoint %q: %w", endpointID, err)
	}
	return out, nil
}

// maxListenersRead bounds the open sessions of one Endpoint OpenListeners
// reads: the most an Endpoint may hold open (the tunnel's cap is at most
// this), so a runaway client cannot make every delivery read without bound.
const maxListenersRead = domain.MaxEndpointSessions

// OpenListeners lists an Endpoint's open agent sessions on every node, in
// the order the log holds their starts, with whether each asked to be
// primary and its filters: what the primary rule and the filters are
// applied to across nodes.
func (v *Addresses) OpenListeners(ctx context.Context, endpointID string) ([]readmodel.AgentSession, error) {
	cached, gen, ok := v.listeners.get(endpointID)
	if ok {
		return cached, nil
	}
	out, err := v.openListeners(ctx, endpointID)
	if err == nil {
		v.listeners.put(endpointID, out, gen)
	}
	return out, err
}

func (v *Addresses) openListeners(ctx context.Context, endpointID string) ([]readmodel.AgentSession, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT agent_id, endpoint_id, target, connected_at, node, asked, filters, position
		FROM agent_sessions WHERE endpoint_id = ? AND open = 1 ORDER BY position LIMIT ?`, endpointID, maxListenersRead)
	if err != nil {
		return nil, fmt.Errorf("list listeners of endpoint %q: %w", endpointID, err)
	}
	defer rows.Close()
	out := []readmodel.AgentSession{}
	for rows.Next() {
		var (
			s       readmodel.AgentSession
			at      int64
			filters string
		)
		if err := rows.Scan(&s.AgentID, &s.EndpointID, &s.Target, &at, &s.Node, &s.Asked, &filters, &s.Position); err != nil {
			return nil, fmt.Errorf("list listeners of endpoint %q: %w", endpointID, err)
		}
		s.ConnectedAt = fromNanos(at)
		if filters != "" {
			if err := json.Unmarshal([]byte(filters), &s.Filters); err != nil {
				return nil, fmt.Errorf("list listeners of endpoint %q: filters of %s: %w", endpointID, s.AgentID, err)
			}
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list listeners of endpoint %q: %w", endpointID, err)
	}
	return out, nil
}

// agentSessionColumns are the columns scanAgentSession reads.
const agentSessionColumns = `agent_id, endpoint_id, target, connected_at, node, disconnected_at, reason`

func scanAgentSession(row interface{ Scan(...any) error }) (readmodel.AgentSession, error) {
	var (
		s      readmodel.AgentSession
		at     int64
		closed sql.NullInt64
	)
	if err := row.Scan(&s.AgentID, &s.EndpointID, &s.Target, &at, &s.Node, &closed, &s.Reason); err != nil {
		return readmodel.AgentSession{}, err
	}
	s.ConnectedAt = fromNanos(at)
	if closed.Valid {
		s.DisconnectedAt = fromNanos(closed.Int64)
	}
	return s, nil
}

// maxSessionsRead bounds the sessions one AgentSessions call reads.
const maxSessionsRead = 100

// AgentSessions returns the agent sessions among ids, by agent ID; an id
// the log never saw connect is absent. At most maxSessionsRead ids are
// read (the first ones), so a caller's list cannot make one query grow
// without bound.
func (v *Addresses) AgentSessions(ctx context.Context, ids []string) (map[string]readmodel.AgentSession, error) {
	out := map[string]readmodel.AgentSession{}
	if len(ids) == 0 {
		return out, nil
	}
	ids = ids[:min(len(ids), maxSessionsRead)]
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	marks := strings.Repeat("?, ", len(ids)-1) + "?"
	rows, err := v.r.QueryContext(ctx, "SELECT "+agentSessionColumns+" FROM agent_sessions WHERE agent_id IN ("+marks+")", args...)
	if err != nil {
		return nil, fmt.Errorf("read agent sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		s, err := scanAgentSession(rows)
		if err != nil {
			return nil, fmt.Errorf("read agent sessions: %w", err)
		}
		out[s.AgentID] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read agent sessions: %w", err)
	}
	return out, nil
}

// LastAgentSession returns the Endpoint's agent session that connected
// last at or before at, and false when none had (no agent ever connected
// to it by then). An explanation of a 503 "no agent connected" names it.
func (v *Addresses) LastAgentSession(ctx context.Context, endpointID string, at time.Time) (readmodel.AgentSession, bool, error) {
	s, err := scanAgentSession(v.r.QueryRowContext(ctx, "SELECT "+agentSessionColumns+` FROM agent_sessions
		WHERE endpoint_id = ? AND connected_at <= ? ORDER BY connected_at DESC LIMIT 1`, endpointID, at.UnixNano()))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return readmodel.AgentSession{}, false, nil
	case err != nil:
		return readmodel.AgentSession{}, false, fmt.Errorf("read last agent session of endpoint %q: %w", endpointID, err)
	}
	return s, true, nil
}
