package projections

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// accountsWriter is the Accounts' writing half: accounts, their tokens, and
// account_events, the index of every event of the streams an account owns
// (of every type, decodable or not, as the log holds them).
type accountsWriter struct {
	// owners caches the account owning each stream the batch saw ("" for
	// none), see index.
	owners map[string]string
	// revoked are the tokens the batch revoked, announced once committed.
	revoked []string
	// quotas are the accounts whose quota the batch set, dropped from the
	// quota cache once committed.
	quotas []string
	// events are the batch's account_events rows, inserted by flush a
	// chunk per statement (see qAccountEvents).
	events []accountEvent
	// streams holds what the batch appended to each of an account's
	// streams other than its deliveries' (its account, token uses,
	// Endpoints, agent sessions, refusal counts, the logins it claims or
	// releases, the invites it makes or is made by): kept for good, their
	// bytes count toward its storage quota as its deliveries do. flush
	// counts them once per stream (account_streams) and account (stored).
	streams     map[string]*streamBytes
	streamOrder []string
	stored      map[string]accountMove
	// signups are the batch's moves of the storage for sign-ups.
	signups signupMoves
	v       *Accounts
}

// streamBytes is what a batch appended to one of an account's streams
// past the revision the views counted before it.
type streamBytes struct {
	account           string
	counted, revision int64 // -1: none
	bytes             int64
}

// accountEvent is an account_events row.
type accountEvent struct {
	account  string
	position int64
	stream   string
	revision int64
}

func (v *Accounts) writer() *accountsWriter {
	return &accountsWriter{owners: map[string]string{}, streams: map[string]*streamBytes{}, stored: map[string]accountMove{}, signups: signupMoves{}, v: v}
}

func (w *accountsWriter) apply(t *txn, payload any) (n int64, handled bool, err error) {
	switch p := payload.(type) {
	case domain.AccountCreated:
		n, err = t.exec(qAccountCreated, p.AccountID, p.Name, t.at(), t.pos(), p.Origin, p.Network)
		if err == nil && n > 0 {
			err = w.storedBefore(t, p.AccountID)
		}
		handled = true
	case domain.AccountQuotaSet:
		n, err = w.quotaSet(t, p)
		w.quotas = append(w.quotas, p.AccountID)
		handled = true
	case domain.TokenIssued:
		name := p.Name
		if name == "" {
			name = domain.FirstTokenName // issued before tokens had names
		}
		n, err = t.exec(qTokenIssued, p.TokenHash, p.TokenID, p.AccountID, t.at(), name, rfc3339Nanos(p.ExpiresAt), p.MemberID, p.Kind)
		if err == nil && p.Kind != domain.TokenKindSession { // sign-ins are the sessions' own rows, not activity
			err = w.activity(t, p.AccountID, p.MemberID, p.TokenID, name)
		}
		handled = true
	case domain.TokenRevoked:
		var name string
		if row, qerr := t.queryRow(qTokenName, p.AccountID, p.TokenID); qerr == nil {
			_ = row.Scan(&name) // a token the views never saw: no name
		}
		n, err = t.exec(qTokenRevoked, p.AccountID, p.TokenID)
		if err == nil {
			err = w.activity(t, p.AccountID, p.By, p.TokenID, name)
		}
		w.revoked = append(w.revoked, p.TokenID)
		handled = true
	case domain.MemberJoined:
		n, err = t.exec(qMemberJoined, p.MemberID, p.AccountID, p.Login, domain.LoginKey(p.Login), p.Role, p.StoredPassword(), t.at())
		if err == nil {
			err = w.activity(t, p.AccountID, p.By, p.MemberID, p.Login+" ("+p.Role+")")
		}
		handled = true
	case domain.MemberRemoved:
		n, err = t.exec(qMemberRemoved, p.AccountID, p.MemberID)
		if err == nil {
			err = w.activity(t, p.AccountID, p.By, p.MemberID, "")
		}
		handled = true
	case domain.MemberRoleChanged:
		n, err = t.exec(qMemberRole, p.Role, p.AccountID, p.MemberID)
		if err == nil {
			err = w.activity(t, p.AccountID, p.By, p.MemberID, p.Role)
		}
		handled = true
	case domain.EndpointCreated:
		// Who changed the team's Endpoints is the owners' to read too.
		err = w.activity(t, p.AccountID, p.By, p.EndpointID, p.Name)
	case domain.EndpointReconfigured:
		err = w.endpointActivity(t, p.By, p.EndpointID, p.Name)
	case domain.EndpointDeleted:
		err = w.endpointActivity(t, p.By, p.EndpointID, "")
	case domain.EndpointSmeeKeySet:
		// A stream key reads the Endpoint's deliveries: who issued or
		// revoked one is the owners' to see.
		detail := "revoked"
		if p.KeyHash != "" {
			detail = "issued"
		}
		err = w.endpointActivity(t, p.By, p.EndpointID, detail)
	case domain.MemberPasswordChanged:
		n, err = t.exec(qMemberPassword, p.StoredPassword(), p.AccountID, p.MemberID)
		if err == nil {
			err = w.activity(t, p.AccountID, p.MemberID, p.MemberID, "")
		}
		handled = true
	case domain.MemberInvited:
		n, err = t.exec(qMemberInvited, p.InviteID, p.AccountID, p.CodeHash, p.Role, p.By, rfc3339Nanos(p.ExpiresAt))
		if err == nil {
			err = w.activity(t, p.AccountID, p.By, p.InviteID, p.Role)
		}
		handled = true
	case domain.MemberInviteUsed:
		n, err = t.exec(qMemberInviteUsed, p.MemberID, p.AccountID, p.InviteID)
		if err == nil {
			err = w.activity(t, p.AccountID, p.MemberID, p.InviteID, "")
		}
		handled = true
	case domain.TokenUsed:
		n, err = t.exec(qTokenUsed, rfc3339Nanos(p.At), p.AccountID, p.TokenID)
		handled = true
	case domain.DeviceCodeRequested:
		n, err = t.exec(qDeviceRequested, p.DeviceID, p.DeviceCodeHash, p.UserCodeHash, p.ClientName, t.at(), rfc3339Nanos(p.ExpiresAt), p.Network)
		handled = true
	case domain.DeviceApproved:
		n, err = t.exec(qDeviceStatus, readmodel.DeviceApproved, p.AccountID, p.DeviceID)
		handled = true
	case domain.DeviceDenied:
		n, err = t.exec(qDeviceStatus, readmodel.DeviceDenied, p.AccountID, p.DeviceID)
		handled = true
	case domain.DeviceRedeemed:
		n, err = t.exec(qDeviceStatus, readmodel.DeviceRedeemed, p.AccountID, p.DeviceID)
		handled = true
	case domain.InviteCreated:
		n, err = t.exec(qInviteCreated, p.InviteID, p.CodeHash, p.CreatedBy, rfc3339Nanos(p.ExpiresAt))
		if err == nil && p.CreatedBy != "" {
			// Kept for good: the inviting account's storage counts it (an
			// operator's invite is the operator's own).
			err = w.countStream(t, p.CreatedBy)
		}
		handled = true
	case domain.InviteUsed:
		n, err = t.exec(qInviteUsed, p.AccountID, p.InviteID)
		if err == nil {
			err = w.countStream(t, p.AccountID) // the new account's
		}
		handled = true
	case domain.LoginClaimed:
		// A login's claim (login-<key hash>) names no account in its
		// stream's name: the account that claims or releases it counts
		// the event, kept for good, as it counts its own stream's.
		err = w.countStream(t, p.AccountID)
	case domain.LoginReleased:
		err = w.countStream(t, p.AccountID)
	}
	if err != nil {
		return n, handled, err
	}
	if p, ok := payload.(domain.StreamDeleted); ok {
		w.dropped(t, p.Stream)
	}
	if err := w.index(t); err != nil {
		return n, handled, fmt.Errorf("index %s at position %d: %w", t.event.Stream, t.event.Position, err)
	}
	return n, handled, nil
}

// storedBefore stores in a new account the bytes its streams counted
// before it existed (a password sign-up claims its login first), with the
// storage for sign-ups when the account is in it.
func (w *accountsWriter) storedBefore(t *txn, id string) error {
	row, err := t.queryRow(qAccountStreamsBefore, id)
	if err != nil {
		return err
	}
	var bytes int64
	if err := row.Scan(&bytes); err != nil {
		return fmt.Errorf("bytes of account %s's streams before it: %w", id, err)
	}
	if bytes == 0 {
		return nil
	}
	return storeAccount(t, w.signups, id, bytes, 0)
}

// index adds the current event to account_events when an account owns its
// stream. The owner is read once per stream and batch; the accounts writer
// runs last, so a DeliveryReceived or EndpointCreated has made its row.
func (w *accountsWriter) index(t *txn) error {
	owner, err := w.owner(t)
	if err != nil || owner == "" {
		return err
	}
	w.events = append(w.events, accountEvent{owner, t.pos(), t.event.Stream, int64(t.event.Revision)})
	if kind, _, _ := domain.ParseStream(t.event.Stream); kind != domain.StreamDelivery {
		// A delivery's bytes are counted by the history (deliveryMove),
		// and go with its stream; every other stream of an account is
		// kept for good, so its bytes count for good.
		return w.countStream(t, owner)
	}
	return nil
}

// countStream notes the current event's bytes for its stream's account,
// unless the views counted its revision already (an event applied again).
func (w *accountsWriter) countStream(t *txn, owner string) error {
	stream := t.event.Stream
	sb, ok := w.streams[stream]
	if !ok {
		sb = &streamBytes{account: owner, counted: -1}
		row, err := t.queryRow(qAccountStreamCounted, stream)
		if err != nil {
			return err
		}
		if err := row.Scan(&sb.counted); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("bytes counted of %s: %w", stream, err)
		}
		sb.revision = sb.counted
		w.streams[stream] = sb
		w.streamOrder = append(w.streamOrder, stream)
	}
	if rev := int64(t.event.Revision); rev > sb.revision {
		sb.revision = rev
		sb.bytes += int64(len(t.event.Data))
	}
	return nil
}

// dropped takes the rows of a delivery stream the history just deleted
// (qAccountEventsDropped) off the batch's rows not inserted yet, as that
// delete would have taken them had they been.
func (w *accountsWriter) dropped(t *txn, stream string) {
	m := t.moved
	if m == nil || m.added || m.grew || m.accountID == "" || domain.DeliveryStream(m.deliveryID) != stream {
		return // the history deleted no rows
	}
	// Its row is gone: later events of the stream (its tombstone) have no
	// owner, as a lookup now finds, and a rebuild never sees the rest.
	w.owners[stream] = ""
	w.events = slices.DeleteFunc(w.events, func(e accountEvent) bool {
		return e.account == m.accountID && e.stream == stream && e.position >= m.from && e.position <= m.to
	})
}

// owner is the account owning the current event's stream ("" for none),
// read once per stream and batch.
func (w *accountsWriter) owner(t *txn) (string, error) {
	stream := t.event.Stream
	if m := t.moved; m != nil && m.added {
		if kind, id, _ := domain.ParseStream(stream); kind == domain.StreamDelivery && id == m.deliveryID {
			w.owners[stream] = m.accountID // the delivery's own stream: spare the lookup
		}
	}
	if o := t.owned; o != nil {
		if kind, id, _ := domain.ParseStream(stream); kind == domain.StreamDelivery && id == o.deliveryID {
			w.owners[stream] = o.accountID // the history's update returned it
		}
	}
	owner, ok := w.owners[stream]
	if !ok {
		var err error
		if owner, err = streamOwner(t, stream); err != nil {
			return "", err
		}
		w.owners[stream] = owner
	}
	return owner, nil
}

// streamOwner is the account owning a stream, "" for none (inspectors,
// their deliveries, unknown streams), read from the rows of the model that
// holds the stream's subject.
func streamOwner(t *txn, stream string) (string, error) {
	kind, id, _ := domain.ParseStream(stream)
	var query string
	switch kind {
	case domain.StreamAccount, domain.StreamTokenUse:
		return id, nil
	case domain.StreamEndpoint, domain.StreamAgent, domain.StreamRefusals: // agent and refusals streams are named by an Endpoint's (address's) id
		query = qEndpointOwner
	case domain.StreamDelivery:
		query = qDeliveryOwner
	default:
		return "", nil
	}
	row, err := t.queryRow(query, id)
	if err != nil {
		return "", err
	}
	var owner string
	if err := row.Scan(&owner); errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("owner of %s: %w", stream, err)
	}
	return owner, nil
}

// endpointActivity notes a change of an Endpoint in its owner's activity.
func (w *accountsWriter) endpointActivity(t *txn, by, endpointID, detail string) error {
	owner, err := w.owner(t)
	if err != nil || owner == "" {
		return err
	}
	return w.activity(t, owner, by, endpointID, detail)
}

// activity notes the current event in the account's activity.
func (w *accountsWriter) activity(t *txn, accountID, by, subject, detail string) error {
	_, err := t.exec(qActivity, accountID, t.pos(), t.at(), t.event.Type, by, subject, detail)
	return err
}

// flush inserts the batch's account_events rows, as many per statement as
// the largest prepared chunk holds: a statement costs more than a row, and
// a proxied delivery has two rows.
func (w *accountsWriter) flush(t *txn) error {
	rows := make([][]any, len(w.events))
	for i, e := range w.events {
		rows[i] = []any{e.account, e.position, e.stream, e.revision}
	}
	w.events = nil
	if _, err := execChunks(t, qAccountEvents, rows); err != nil {
		return fmt.Errorf("index %d events: %w", len(rows), err)
	}
	var accounts []string
	for _, stream := range w.streamOrder {
		sb := w.streams[stream]
		if sb.revision <= sb.counted {
			continue
		}
		if _, err := t.exec(qAccountStreamCount, stream, sb.account, sb.revision, sb.bytes); err != nil {
			return fmt.Errorf("count bytes of %s: %w", stream, err)
		}
		m, ok := w.stored[sb.account]
		if !ok {
			accounts = append(accounts, sb.account)
		}
		m.bytes += sb.bytes
		w.stored[sb.account] = m
	}
	w.streamOrder = nil
	for _, id := range accounts {
		if err := storeAccount(t, w.signups, id, w.stored[id].bytes, 0); err != nil {
			return fmt.Errorf("store bytes of account %s's streams: %w", id, err)
		}
	}
	return nil
}

func (w *accountsWriter) committed() {
	if len(w.revoked) > 0 {
		w.v.announceRevoked(w.revoked)
	}
	if len(w.quotas) > 0 || len(w.stored) > 0 {
		w.v.quotas.committed(w.quotas, w.stored)
	}
	if len(w.signups) > 0 {
		w.v.signups.moved(w.signups)
	}
}

// quotaSet records an account's quota override. A storage quota of its
// own takes the account out of the storage for sign-ups, and back to the
// relay's default puts it in again, with the bytes it holds: the batch's
// own moves of it are stored later (flush) and count as it is then.
func (w *accountsWriter) quotaSet(t *txn, p domain.AccountQuotaSet) (int64, error) {
	row, err := t.queryRow(qAccountPool, p.AccountID)
	if err != nil {
		return 0, err
	}
	var (
		origin, network string
		quota, stored   int64
	)
	if err := row.Scan(&origin, &network, &quota, &stored); errors.Is(err, sql.ErrNoRows) {
		return 0, nil // no such account, as an update of no row
	} else if err != nil {
		return 0, fmt.Errorf("read account %s: %w", p.AccountID, err)
	}
	was, is := domain.InSignupStorage(origin, quota), domain.InSignupStorage(origin, p.StorageBytes)
	switch {
	case was && !is:
		w.signups[network] -= stored
	case !was && is:
		w.signups[network] += stored
	}
	return t.exec(qAccountQuota, p.StorageBytes, p.Rate, p.AccountID, p.APICost)
}

// rfc3339Nanos is an event's RFC 3339 time in unix nanoseconds; empty or
// unreadable is 0 (never), so that a bad value never stops the views.
func rfc3339Nanos(s string) int64 {
	if s == "" {
		return 0
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return at.UnixNano()
}
