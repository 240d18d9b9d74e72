package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// Accounts is the read model of accounts, their API tokens and the index
// of the events of the streams each account owns (account_events).
type Accounts struct {
	r  *readPool  // the runner's reader pool
	rs *readStmts // the runner's hot reads
	// quotas caches AccountQuota's rows (quotacache.go).
	quotas *quotaCache
	// signups sums the stored bytes of the accounts in the storage for
	// sign-ups, in all and per network (domain.InSignupStorage).
	signups *networkUsage
	// unapplied adds the account's deliveries the views have not applied
	// yet to its stored bytes.
	unapplied *unapplied

	// revoked are the channels WatchToken handed out, by token id; a
	// committed TokenRevoked closes them.
	mu      sync.Mutex
	revoked map[string]map[chan struct{}]struct{}
}

// tokenColumns are a token's columns, read by scanToken.
const tokenColumns = "t.token_id, t.account_id, t.name, t.issued_at, t.expires_at, t.last_used, t.member_id, t.kind"

// Account returns an account.
func (v *Accounts) Account(ctx context.Context, id string) (readmodel.Account, error) {
	a, err := scanAccount(v.r.QueryRowContext(ctx, "SELECT id, name, created_at FROM accounts WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Account{}, notFound("account", id)
	}
	if err != nil {
		return readmodel.Account{}, fmt.Errorf("read account %q: %w", id, err)
	}
	return a, nil
}

// AccountByTokenHash returns the account a token acts for, given the hex
// SHA-256 of the token; revoked and unknown tokens are not found.
func (v *Accounts) AccountByTokenHash(ctx context.Context, hash string) (readmodel.Account, error) {
	a, _, err := v.TokenByHash(ctx, hash)
	return a, err
}

// TokenByHash returns a token and the account it acts for, given the hex
// SHA-256 of the token; revoked and unknown tokens are not found, expired
// ones are (the caller decides with its clock).
func (v *Accounts) TokenByHash(ctx context.Context, hash string) (readmodel.Account, readmodel.Token, error) {
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.Account{}, readmodel.Token{}, fmt.Errorf("read token: %w", err)
	}
	var (
		a       readmodel.Account
		created int64
	)
	tok, err := scanToken(v.r.pointRow(ctx, qctx, v.rs.token, hash), &a.ID, &a.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Account{}, readmodel.Token{}, fmt.Errorf("token: %w", domain.ErrNotFound) // never echo a credential
	}
	if err != nil {
		return readmodel.Account{}, readmodel.Token{}, fmt.Errorf("read token: %w", err)
	}
	a.CreatedAt = fromNanos(created)
	return a, tok, nil
}

// Tokens lists the unrevoked tokens of an account, oldest first, through
// tokens_live: none of the revoked ones are read.
func (v *Accounts) Tokens(ctx context.Context, accountID string) ([]readmodel.Token, error) {
	rows, err := v.r.QueryContext(ctx, "SELECT "+tokenColumns+` FROM tokens AS t INDEXED BY tokens_live
		WHERE t.account_id = ? AND t.revoked = 0 ORDER BY t.issued_at, t.token_id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list tokens of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.Token{}
	for rows.Next() {
		tok, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens of account %q: %w", accountID, err)
		}
		out = append(out, tok)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens of account %q: %w", accountID, err)
	}
	return out, nil
}

// WatchToken returns a channel closed once the views commit the token's
// revocation, and a function that stops watching. A caller that checked the
// token before watching checks it again after, so that a revocation
// committed in between is not missed.
func (v *Accounts) WatchToken(tokenID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	v.mu.Lock()
	if v.revoked == nil {
		v.revoked = map[string]map[chan struct{}]struct{}{}
	}
	set := v.revoked[tokenID]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		v.revoked[tokenID] = set
	}
	set[ch] = struct{}{}
	v.mu.Unlock()
	return ch, func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		if set, ok := v.revoked[tokenID]; ok {
			if _, ok := set[ch]; ok {
				delete(set, ch)
				if len(set) == 0 {
					delete(v.revoked, tokenID)
				}
			}
		}
	}
}

// announceRevoked closes the watchers of tokens a committed batch revoked.
func (v *Accounts) announceRevoked(ids []string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range ids {
		for ch := range v.revoked[id] {
			close(ch)
		}
		delete(v.revoked, id)
	}
}

// DeviceByHash returns the newest device code whose device code
// (byUser false) or user code (byUser true) has the given hex SHA-256.
func (v *Accounts) DeviceByHash(ctx context.Context, hash string, byUser bool) (readmodel.DeviceCode, error) {
	col := "device_hash"
	if byUser {
		col = "user_hash"
	}
	var (
		d                readmodel.DeviceCode
		created, expires int64
	)
	err := v.r.QueryRowContext(ctx, `SELECT id, client_name, status, account_id, created_at, expires_at FROM device_codes
		WHERE `+col+` = ? ORDER BY created_at DESC LIMIT 1`, hash).Scan(&d.ID, &d.ClientName, &d.Status, &d.AccountID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.DeviceCode{}, fmt.Errorf("device code: %w", domain.ErrNotFound) // never echo a code
	}
	if err != nil {
		return readmodel.DeviceCode{}, fmt.Errorf("read device code: %w", err)
	}
	d.CreatedAt, d.ExpiresAt = fromNanos(created), fromNanos(expires)
	return d, nil
}

// PendingDeviceCodes counts the device codes waiting for a decision at
// now (neither decided nor expired), up to most: one walk of an index of
// the pending codes (device_codes_pending), at most most rows.
func (v *Accounts) PendingDeviceCodes(ctx context.Context, now time.Time, most int) (int, error) {
	var n int
	err := v.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM device_codes
		WHERE status = 'pending' AND expires_at > ? LIMIT ?)`, now.UnixNano(), most).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending device codes: %w", err)
	}
	return n, nil
}

// NetworkPendingDeviceCodes is PendingDeviceCodes of the codes the client
// network asked for: one walk of device_codes_pending_by_network, at most
// most rows.
func (v *Accounts) NetworkPendingDeviceCodes(ctx context.Context, network string, now time.Time, most int) (int, error) {
	var n int
	err := v.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM device_codes
		WHERE status = 'pending' AND network = ? AND expires_at > ? LIMIT ?)`, network, now.UnixNano(), most).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count pending device codes of network %s: %w", network, err)
	}
	return n, nil
}

// InviteByHash returns the id of the invite whose code has the given hex
// SHA-256 (used or not: its stream decides).
func (v *Accounts) InviteByHash(ctx context.Context, hash string) (string, error) {
	var id string
	err := v.r.QueryRowContext(ctx, "SELECT id FROM invites WHERE code_hash = ?", hash).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("invite: %w", domain.ErrNotFound) // never echo a code
	}
	if err != nil {
		return "", fmt.Errorf("read invite: %w", err)
	}
	return id, nil
}

// OpenInvites counts the sign-up invites createdBy made that are neither
// used nor expired at now, and tells when the first of them expires.
func (v *Accounts) OpenInvites(ctx context.Context, createdBy string, now time.Time) (int, time.Time, error) {
	var (
		n     int
		first sql.NullInt64
	)
	err := v.r.QueryRowContext(ctx, "SELECT COUNT(*), MIN(expires_at) FROM invites WHERE created_by = ? AND used_by = '' AND expires_at > ?",
		createdBy, now.UnixNano()).Scan(&n, &first)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count open invites: %w", err)
	}
	return n, fromNanos(first.Int64), nil
}

func scanAccount(row interface{ Scan(...any) error }) (readmodel.Account, error) {
	var (
		a       readmodel.Account
		created int64
	)
	if err := row.Scan(&a.ID, &a.Name, &created); err != nil {
		return readmodel.Account{}, err
	}
	a.CreatedAt = fromNanos(created)
	return a, nil
}

// scanToken reads tokenColumns after the given leading destinations.
func scanToken(row interface{ Scan(...any) error }, lead ...any) (readmodel.Token, error) {
	var (
		t                     readmodel.Token
		issued, expires, used int64
	)
	if err := row.Scan(append(lead, &t.ID, &t.AccountID, &t.Name, &issued, &expires, &used, &t.MemberID, &t.Kind)...); err != nil {
		return readmodel.Token{}, err
	}
	t.CreatedAt = fromNanos(issued)
	if expires != 0 {
		t.ExpiresAt = fromNanos(expires)
	}
	if used != 0 {
		t.LastUsed = fromNanos(used)
	}
	return t, nil
}

// AccountEvents lists, in log order, up to limit events after position
// after of the streams the account owns (its account, its Endpoints and
// their agents, their deliveries): an index read whose cost is the page's,
// however long the log.
func (v *Accounts) AccountEvents(ctx context.Context, accountID string, after uint64, limit int) ([]readmodel.EventRef, error) {
	rows, err := v.r.QueryContext(ctx, `SELECT position, stream, revision FROM account_events
		WHERE account_id = ? AND position > ? ORDER BY position LIMIT ?`, accountID, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("list events of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.EventRef{}
	for rows.Next() {
		var (
			r             readmodel.EventRef
			pos, revision int64
		)
		if err := rows.Scan(&pos, &r.Stream, &revision); err != nil {
			return nil, fmt.Errorf("list events of account %q: %w", accountID, err)
		}
		r.Position, r.Revision = uint64(pos), uint64(revision)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of account %q: %w", accountID, err)
	}
	return out, nil
}

// memberColumns are a member's columns, read by scanMember.
const memberColumns = "member_id, account_id, login, role, password_hash, joined_at"

func scanMember(row interface{ Scan(...any) error }) (readmodel.Member, error) {
	var (
		m      readmodel.Member
		joined int64
	)
	if err := row.Scan(&m.ID, &m.AccountID, &m.Login, &m.Role, &m.PasswordHash, &joined); err != nil {
		return readmodel.Member{}, err
	}
	m.JoinedAt = fromNanos(joined)
	return m, nil
}

// MemberByLogin returns the current member whose login is key (the login
// without case, domain.LoginKey).
func (v *Accounts) MemberByLogin(ctx context.Context, key string) (readmodel.Member, error) {
	m, err := scanMember(v.r.QueryRowContext(ctx, "SELECT "+memberColumns+" FROM members WHERE login_key = ? AND removed = 0", key))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Member{}, fmt.Errorf("member: %w", domain.ErrNotFound) // never echo a login
	}
	if err != nil {
		return readmodel.Member{}, fmt.Errorf("read member: %w", err)
	}
	return m, nil
}

// Member returns a current member of the account; anyone else is not found.
func (v *Accounts) Member(ctx context.Context, accountID, memberID string) (readmodel.Member, error) {
	m, err := scanMember(v.r.QueryRowContext(ctx, "SELECT "+memberColumns+" FROM members WHERE account_id = ? AND member_id = ? AND removed = 0", accountID, memberID))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.Member{}, notFound("member", memberID)
	}
	if err != nil {
		return readmodel.Member{}, fmt.Errorf("read member: %w", err)
	}
	return m, nil
}

// Members lists the account's current members, oldest first, through
// members_live: none of the removed ones are read.
func (v *Accounts) Members(ctx context.Context, accountID string) ([]readmodel.Member, error) {
	rows, err := v.r.QueryContext(ctx, "SELECT "+memberColumns+" FROM members INDEXED BY members_live WHERE account_id = ? AND removed = 0 ORDER BY joined_at, member_id", accountID)
	if err != nil {
		return nil, fmt.Errorf("list members of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.Member{}
	for rows.Next() {
		m, err := scanMember(rows)
		if err != nil {
			return nil, fmt.Errorf("list members of account %q: %w", accountID, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MemberInviteByHash returns the member invite whose code has the given
// hex SHA-256 (used or not: its account's stream decides).
func (v *Accounts) MemberInviteByHash(ctx context.Context, hash string) (readmodel.MemberInvite, error) {
	var (
		m       readmodel.MemberInvite
		expires int64
	)
	err := v.r.QueryRowContext(ctx, "SELECT id, account_id, role, expires_at, used_by FROM member_invites WHERE code_hash = ?", hash).
		Scan(&m.ID, &m.AccountID, &m.Role, &expires, &m.UsedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.MemberInvite{}, fmt.Errorf("member invite: %w", domain.ErrNotFound) // never echo a code
	}
	if err != nil {
		return readmodel.MemberInvite{}, fmt.Errorf("read member invite: %w", err)
	}
	m.ExpiresAt = fromNanos(expires)
	return m, nil
}

// Activity lists up to limit changes to the account, newest first, before
// position before (0: from the newest).
func (v *Accounts) Activity(ctx context.Context, accountID string, before uint64, limit int) ([]readmodel.Activity, error) {
	if before == 0 {
		before = 1<<63 - 1
	}
	rows, err := v.r.QueryContext(ctx, `SELECT position, at, type, by_member, subject, detail FROM activity
		WHERE account_id = ? AND position < ? ORDER BY position DESC LIMIT ?`, accountID, int64(before), limit)
	if err != nil {
		return nil, fmt.Errorf("list activity of account %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []readmodel.Activity{}
	for rows.Next() {
		var (
			a       readmodel.Activity
			pos, at int64
		)
		if err := rows.Scan(&pos, &at, &a.Type, &a.By, &a.Subject, &a.Detail); err != nil {
			return nil, fmt.Errorf("list activity of account %q: %w", accountID, err)
		}
		a.Position, a.At = uint64(pos), fromNanos(at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// usageColumns are an account's usage columns, read by scanUsage.
const usageColumns = "id, name, stored_bytes, deliveries, storage_quota, rate_quota, api_cost_quota, origin, network"

func scanUsage(row interface{ Scan(...any) error }) (readmodel.AccountUsage, error) {
	var u readmodel.AccountUsage
	err := row.Scan(&u.AccountID, &u.Name, &u.StoredBytes, &u.Deliveries, &u.StorageQuota, &u.RateQuota, &u.APICostQuota, &u.Origin, &u.Network)
	return u, err
}

// AccountQuota returns an account's stored bytes and quota override:
// what ingress reads on every delivery to one of its Endpoints, from
// memory when it can (quotacache.go), else one prepared point read.
func (v *Accounts) AccountQuota(ctx context.Context, id string) (readmodel.AccountUsage, error) {
	// The ledger first: a receipt it no longer holds is one the views have
	// committed and cached already (unapplied.applied), so the read below
	// counts it; read the other way round, it could be counted by neither.
	pending := v.unapplied.ofAccount(id)
	u, gen, ok := v.quotas.get(id)
	if !ok {
		var err error
		if u, err = v.readQuota(ctx, id); err != nil {
			return readmodel.AccountUsage{}, err
		}
		v.quotas.put(id, u, gen)
	}
	u.StoredBytes += pending
	return u, nil
}

func (v *Accounts) readQuota(ctx context.Context, id string) (readmodel.AccountUsage, error) {
	qctx, err := pointRead(ctx)
	if err != nil {
		return readmodel.AccountUsage{}, fmt.Errorf("read quota of account %q: %w", id, err)
	}
	u, err := scanUsage(v.r.pointRow(ctx, qctx, v.rs.accountQuota, id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.AccountUsage{}, notFound("account", id)
	}
	if err != nil {
		return readmodel.AccountUsage{}, fmt.Errorf("read quota of account %q: %w", id, err)
	}
	return u, nil
}

// AccountUsage is AccountQuota with the deliveries received since since
// counted by the hour (account_hours): those of since's whole hour count,
// so the window is up to an hour longer than asked.
func (v *Accounts) AccountUsage(ctx context.Context, id string, since time.Time) (readmodel.AccountUsage, error) {
	u, err := scanUsage(v.r.QueryRowContext(ctx, "SELECT "+usageColumns+" FROM accounts WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return readmodel.AccountUsage{}, notFound("account", id)
	}
	if err != nil {
		return readmodel.AccountUsage{}, fmt.Errorf("read usage of account %q: %w", id, err)
	}
	if err := v.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(deliveries), 0) FROM account_hours WHERE account_id = ? AND hour >= ?`,
		id, since.UnixNano()/int64(time.Hour)).Scan(&u.DeliveriesWindow); err != nil {
		return readmodel.AccountUsage{}, fmt.Errorf("count deliveries of account %q: %w", id, err)
	}
	return u, nil
}

// TopUsage lists up to n accounts, most stored bytes first, and the
// relay's totals over every account (Deliveries and StoredBytes).
func (v *Accounts) TopUsage(ctx context.Context, n int) ([]readmodel.AccountUsage, readmodel.AccountUsage, error) {
	var total readmodel.AccountUsage
	if err := v.r.QueryRowContext(ctx, "SELECT COALESCE(SUM(stored_bytes), 0), COALESCE(SUM(deliveries), 0) FROM accounts").
		Scan(&total.StoredBytes, &total.Deliveries); err != nil {
		return nil, total, fmt.Errorf("sum usage of accounts: %w", err)
	}
	rows, err := v.r.QueryContext(ctx, "SELECT "+usageColumns+" FROM accounts ORDER BY stored_bytes DESC, id LIMIT ?", n)
	if err != nil {
		return nil, total, fmt.Errorf("list usage of accounts: %w", err)
	}
	defer rows.Close()
	out := []readmodel.AccountUsage{}
	for rows.Next() {
		u, err := scanUsage(rows)
		if err != nil {
			return nil, total, fmt.Errorf("list usage of accounts: %w", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, total, fmt.Errorf("list usage of accounts: %w", err)
	}
	return out, total, nil
}

// EndpointNamed returns the id of an account's Endpoint named name that is
// not deleted, "" when there is none (through endpoints_live: at most
// --account-endpoints rows, none of the deleted ones).
func (v *Accounts) EndpointNamed(ctx context.Context, accountID, name string) (string, error) {
	var id string
	err := v.r.QueryRowContext(ctx, "SELECT id FROM endpoints INDEXED BY endpoints_live WHERE account_id = ? AND deleted = 0 AND name = ? ORDER BY position LIMIT 1",
		accountID, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find endpoint %q of account %q: %w", name, accountID, err)
	}
	return id, nil
}

// CountEndpoints counts an account's Endpoints that are not deleted
// (through endpoints_live, none of the deleted ones).
func (v *Accounts) CountEndpoints(ctx context.Context, accountID string) (int, error) {
	var n int
	err := v.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM endpoints INDEXED BY endpoints_live WHERE account_id = ? AND deleted = 0", accountID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count endpoints of account %q: %w", accountID, err)
	}
	return n, nil
}
