package projections

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/domain"
)

// addressesWriter is the Addresses' writing half: inspectors, Endpoints,
// agent sessions, rate-limit refusals, and two figures that follow the
// history (txn.moved): each address's last activity and each inspector's
// stored bytes. Both are deferred to flush and written once per address.
type addressesWriter struct {
	a *Addresses
	// sessions are the Endpoints whose agent sessions the batch changed.
	sessions []string
	// purged are the inspectors the batch purged: flush lists those still
	// holding deliveries once the history has written the batch's rows.
	purged []string

	// activity holds the latest delivery time of each address the batch
	// received deliveries for (see noteActivity).
	activity      map[addressKey]int64
	activityOrder []addressKey

	// stored holds the change of each inspector's stored bytes, made once
	// per inspector by flush; storedDone the part already written.
	stored      map[string]int64
	storedDone  map[string]int64
	storedOrder []string

	// guests holds the change of the inspectors' stored bytes per client
	// network that created them ("" for none), for networkUsage once the
	// batch commits.
	guests map[string]int64
	// signups holds the batch's moves of the storage for sign-ups, for
	// the Accounts' networkUsage once the batch commits.
	signups signupMoves

	// accounts holds the change of each account's stored bytes and
	// deliveries, made once per account by flush.
	accounts     map[string]accountMove
	accountOrder []string
	// hours holds the change of each account's deliveries by the hour.
	hours     map[accountHour]int64
	hourOrder []accountHour

	// For the address cache once the batch commits: the addresses whose
	// row changed other than by activity, and the activity times stored.
	changed        []string
	activityStored map[string]int64
}

func (v *Addresses) writer() *addressesWriter {
	return &addressesWriter{a: v, activity: map[addressKey]int64{}, stored: map[string]int64{},
		storedDone: map[string]int64{}, activityStored: map[string]int64{}, accounts: map[string]accountMove{}, guests: map[string]int64{}, signups: signupMoves{},
		hours: map[accountHour]int64{}}
}

// accountHour names an account's deliveries received in one Unix hour.
type accountHour struct {
	account string
	hour    int64
}

// accountMove is what a batch changes of an account's usage.
type accountMove struct{ bytes, deliveries int64 }

// addressKey names an inspector or an Endpoint.
type addressKey struct {
	kind domain.AddressKind
	id   string
}

func (w *addressesWriter) apply(t *txn, payload any) (n int64, handled bool, err error) {
	if m := t.moved; m != nil {
		w.follow(t, m)
	}
	switch p := payload.(type) {
	case domain.InspectorCreated:
		w.changed = append(w.changed, p.InspectorID)
		n, err = w.inspectorCreated(t, p)
	case domain.InspectorExpired:
		w.changed = append(w.changed, p.InspectorID)
		n, err = t.exec(qInspectorExpired, p.InspectorID)
	case domain.InspectorPurged:
		w.changed = append(w.changed, p.InspectorID)
		n, err = w.inspectorPurged(t, p)
	case domain.AddressRateLimited:
		if p.AddressKind == domain.AddressEndpoint {
			n, err = t.exec(qEndpointRefused, p.Refused, t.pos(), p.Address)
			break
		}
		w.changed = append(w.changed, p.Address)
		n, err = w.inspectorRefused(t, p)
	case domain.EndpointCreated:
		w.changed = append(w.changed, p.EndpointID)
		n, err = w.endpointCreated(t, p)
	case domain.EndpointReconfigured:
		w.changed = append(w.changed, p.EndpointID)
		var answers, filters string
		if filters, err = filtersJSON(p.Filters); err != nil {
			return 0, true, err
		}
		queue, qerr := queueJSON(p.Queue)
		if qerr != nil {
			return 0, true, qerr
		}
		if answers, err = encodeAnswers(p.Answer, p.Handshakes); err == nil {
			n, err = t.exec(qEndpointReconfigured, p.Name, string(p.Mode), p.Target, p.ResponseCapture, t.pos(), answers, filters, p.RetentionMs, queue, p.EndpointID)
		}
	case domain.InspectorAnswerSet:
		w.changed = append(w.changed, p.InspectorID)
		var answers string
		if answers, err = encodeAnswers(p.Answer, p.Handshakes); err == nil {
			n, err = t.exec(qInspectorAnswers, answers, p.InspectorID)
		}
	case domain.EndpointRetained:
		w.changed = append(w.changed, p.EndpointID)
		n, err = w.endpointRetained(t, p)
	case domain.EndpointDeleted:
		w.changed = append(w.changed, p.EndpointID)
		n, err = t.exec(qEndpointDeleted, t.pos(), p.EndpointID)
	case domain.EndpointSmeeKeySet:
		w.changed = append(w.changed, p.EndpointID)
		n, err = t.exec(qEndpointSmeeKey, p.KeyHash, t.pos(), p.EndpointID)
	case domain.AgentConnected:
		w.sessions = append(w.sessions, p.EndpointID)
		filters := ""
		if len(p.Filters) > 0 {
			b, jerr := json.Marshal(p.Filters)
			if jerr != nil {
				return 0, true, fmt.Errorf("encode session filters: %w", jerr)
			}
			filters = string(b)
		}
		n, err = t.exec(qAgentConnected, p.AgentID, p.EndpointID, p.Target, t.at(), t.pos(), p.Node, p.Primary, filters)
	case domain.AgentDisconnected:
		w.sessions = append(w.sessions, p.EndpointID)
		n, err = t.exec(qAgentDisconnected, t.at(), p.Reason, p.AgentID, p.EndpointID)
	default:
		return 0, false, nil
	}
	if err == nil {
		err = w.countInspectorStream(t)
	}
	return n, true, err
}

// countInspectorStream counts the current event in its inspector's stored
// bytes when it is an event of an inspector's own stream (its creation,
// answers, expiry, purge): retention deletes an inspector's deliveries,
// not that stream, so its bytes stay counted, in the inspector's quota and
// the guests' storage, for good.
func (w *addressesWriter) countInspectorStream(t *txn) error {
	kind, id, _ := domain.ParseStream(t.event.Stream)
	if kind != domain.StreamInspector {
		return nil
	}
	size := int64(len(t.event.Data))
	row, err := t.queryRow(qInspectorStreamBytes, size, int64(t.event.Revision), id)
	if err != nil {
		return err
	}
	var network string
	if err := row.Scan(&network); errors.Is(err, sql.ErrNoRows) {
		return nil // counted already, or no such inspector
	} else if err != nil {
		return fmt.Errorf("count bytes of %s: %w", t.event.Stream, err)
	}
	w.guests[network] += size
	return nil
}

// inspectorRefused adds a count of an inspector's refused requests to its
// row, and the count's bytes to its stored bytes: the refusals stream is
// kept for good, as the inspector's own stream is, so its bytes count in
// the inspector's quota and the guests' storage, once per event
// (refused_position).
func (w *addressesWriter) inspectorRefused(t *txn, p domain.AddressRateLimited) (int64, error) {
	size := int64(len(t.event.Data))
	row, err := t.queryRow(qInspectorRefused, p.Refused, t.pos(), p.Address, size)
	if err != nil {
		return 0, err
	}
	var network string
	if err := row.Scan(&network); errors.Is(err, sql.ErrNoRows) {
		return 0, nil // counted already, or no such inspector
	} else if err != nil {
		return 0, fmt.Errorf("count refusals of inspector %s: %w", p.Address, err)
	}
	w.guests[network] += size
	return 1, nil
}

// follow notes what a delivery added to or dropped from an address changes
// here: a new delivery is activity, and an inspector's deliveries count
// against its stored bytes.
func (w *addressesWriter) follow(t *txn, m *deliveryMove) {
	if m.added {
		w.noteActivity(t, m.kind, m.address)
	}
	d := m.bytes
	if !m.added && !m.grew {
		d = -d
	}
	if m.grew {
		// An attempt's answer: bytes, but neither a delivery nor activity.
		if m.kind == domain.AddressEndpoint && m.accountID != "" {
			am, ok := w.accounts[m.accountID]
			if !ok {
				w.accountOrder = append(w.accountOrder, m.accountID)
			}
			am.bytes += d
			w.accounts[m.accountID] = am
		}
		if m.kind == domain.AddressInspector {
			if _, ok := w.stored[m.address]; !ok {
				w.storedOrder = append(w.storedOrder, m.address)
			}
			w.stored[m.address] += d
		}
		return
	}
	if m.kind == domain.AddressEndpoint && m.accountID != "" {
		am, ok := w.accounts[m.accountID]
		if !ok {
			w.accountOrder = append(w.accountOrder, m.accountID)
		}
		n := int64(1)
		if !m.added {
			n = -1 // a rebuild never sees a deleted delivery: neither may the counts
		}
		am.bytes += d
		am.deliveries += n
		w.accounts[m.accountID] = am
		key := accountHour{m.accountID, m.at / int64(time.Hour)}
		if _, ok := w.hours[key]; !ok {
			w.hourOrder = append(w.hourOrder, key)
		}
		w.hours[key] += n
	}
	if m.kind != domain.AddressInspector {
		return
	}
	if _, ok := w.stored[m.address]; !ok {
		w.storedOrder = append(w.storedOrder, m.address)
	}
	w.stored[m.address] += d
}

func (w *addressesWriter) inspectorCreated(t *txn, p domain.InspectorCreated) (int64, error) {
	if err := w.storeDeferred(t, addressKey{domain.AddressInspector, p.InspectorID}); err != nil {
		return 0, err
	}
	return t.exec(qInspectorCreated, p.InspectorID, t.at(), p.IdleTTLMs, t.pos(), p.Smee, p.Network)
}

func (w *addressesWriter) endpointCreated(t *txn, p domain.EndpointCreated) (int64, error) {
	if err := w.storeActivity(t, addressKey{domain.AddressEndpoint, p.EndpointID}); err != nil {
		return 0, err
	}
	answers, err := encodeAnswers(p.Answer, p.Handshakes)
	if err != nil {
		return 0, err
	}
	filters, err := filtersJSON(p.Filters)
	if err != nil {
		return 0, err
	}
	queue, err := queueJSON(p.Queue)
	if err != nil {
		return 0, err
	}
	return t.exec(qEndpointCreated, p.EndpointID, p.AccountID, p.Name, string(p.Mode), p.Target,
		p.ResponseCapture, t.at(), t.pos(), answers, filters, p.RetentionMs, queue)
}

// endpointRetained notes an Endpoint's retention decision. Deferred
// activity of this batch is stored first, as in inspectorPurged, so the
// decision's activity is compared with the final value.
func (w *addressesWriter) endpointRetained(t *txn, p domain.EndpointRetained) (int64, error) {
	cutoff, err := time.Parse(time.RFC3339Nano, p.Cutoff)
	if err != nil {
		return 0, fmt.Errorf("retention of endpoint %s: cutoff: %w", p.EndpointID, err)
	}
	last, err := time.Parse(time.RFC3339Nano, p.LastActivityAt)
	if err != nil {
		return 0, fmt.Errorf("retention of endpoint %s: last activity: %w", p.EndpointID, err)
	}
	if err := w.storeActivity(t, addressKey{domain.AddressEndpoint, p.EndpointID}); err != nil {
		return 0, err
	}
	return t.exec(qEndpointRetained, cutoff.UnixNano(), last.UnixNano(), p.EndpointID)
}

// filtersJSON is how the endpoints view keeps filters: JSON, ” for none.
func filtersJSON(fs []domain.Filter) (string, error) {
	if len(fs) == 0 {
		return "", nil
	}
	b, err := json.Marshal(fs)
	if err != nil {
		return "", fmt.Errorf("encode filters: %w", err)
	}
	return string(b), nil
}

// parseFilters reads filtersJSON's form back.
func parseFilters(s string) ([]domain.Filter, error) {
	if s == "" {
		return nil, nil
	}
	var fs []domain.Filter
	if err := json.Unmarshal([]byte(s), &fs); err != nil {
		return nil, fmt.Errorf("decode filters: %w", err)
	}
	return fs, nil
}

// queueJSON is how the endpoints view keeps a queue policy: JSON, "" for
// none (the defaults).
func queueJSON(p *domain.QueuePolicy) (string, error) {
	if p == nil {
		return "", nil
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode queue policy: %w", err)
	}
	return string(b), nil
}

// parseQueue reads queueJSON's form back.
func parseQueue(s string) (*domain.QueuePolicy, error) {
	if s == "" {
		return nil, nil
	}
	var p domain.QueuePolicy
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("decode queue policy: %w", err)
	}
	return &p, nil
}

// inspectorPurged marks the inspector purged. Its last activity becomes the
// decision's: deferred activity of this batch is stored first, as
// inspectorCreated does, so the value set here is the final one.
func (w *addressesWriter) inspectorPurged(t *txn, p domain.InspectorPurged) (int64, error) {
	last, err := time.Parse(time.RFC3339Nano, p.LastActivityAt)
	if err != nil {
		return 0, fmt.Errorf("purge of inspector %s: last activity: %w", p.InspectorID, err)
	}
	if err := w.storeActivity(t, addressKey{domain.AddressInspector, p.InspectorID}); err != nil {
		return 0, err
	}
	w.purged = append(w.purged, p.InspectorID)
	return t.exec(qInspectorPurged, last.UnixNano(), p.InspectorID)
}

// noteActivity moves an address's last activity forward to the current event.
// The update is deferred to flush and made once per address with the
// latest time: activity only ever moves forward (MAX), so one update with
// the maximum leaves the row as the series of updates would. Only creating
// the address would tell the two apart (an update before the row exists
// changes nothing), so inspectorCreated and endpointCreated store what is
// deferred for their address first.
func (w *addressesWriter) noteActivity(t *txn, kind domain.AddressKind, address string) {
	if kind != domain.AddressInspector && kind != domain.AddressEndpoint {
		return
	}
	key, at := addressKey{kind, address}, t.at()
	latest, ok := w.activity[key]
	if !ok {
		w.activityOrder = append(w.activityOrder, key)
	}
	if !ok || at > latest {
		w.activity[key] = at
	}
}

// storeDeferred runs the deferred activity and stored-bytes updates of an
// inspector, as inspectorCreated needs.
func (w *addressesWriter) storeDeferred(t *txn, key addressKey) error {
	if err := w.storeActivity(t, key); err != nil {
		return err
	}
	return w.storeStored(t, key.id)
}

// storeActivity runs the deferred activity update of one address, if any.
func (w *addressesWriter) storeActivity(t *txn, key addressKey) error {
	at, ok := w.activity[key]
	if !ok {
		return nil
	}
	delete(w.activity, key)
	query := qInspectorActivity
	if key.kind == domain.AddressEndpoint {
		query = qEndpointActivity
	}
	if _, err := t.exec(query, at, key.id); err != nil {
		return fmt.Errorf("store activity of %s %s: %w", key.kind, key.id, err)
	}
	if at > w.activityStored[key.id] {
		w.activityStored[key.id] = at
	}
	return nil
}

// storeStored runs the deferred stored-bytes update of one inspector, if
// any. Like storeActivity, inspectorCreated calls it first, so bytes noted
// before the row existed change nothing, as event by event they would not.
// What was stored stays in w.stored for the address cache.
func (w *addressesWriter) storeStored(t *txn, id string) error {
	d := w.stored[id] - w.storedDone[id]
	if d == 0 {
		return nil
	}
	w.storedDone[id] += d
	row, err := t.queryRow(qInspectorStored, d, id)
	if err != nil {
		return fmt.Errorf("store bytes of inspector %s: %w", id, err)
	}
	var network string
	if err := row.Scan(&network); errors.Is(err, sql.ErrNoRows) {
		return nil // no such inspector: nothing stored, as an update of no row
	} else if err != nil {
		return fmt.Errorf("store bytes of inspector %s: %w", id, err)
	}
	w.guests[network] += d
	return nil
}

// flush runs every deferred activity and stored-bytes update.
func (w *addressesWriter) flush(t *txn) error {
	// The history flushed first: its held rows are in deliveries, and
	// the batch's dropped ones are gone.
	for _, id := range w.purged {
		if _, err := t.exec(qInspectorPurging, id); err != nil {
			return fmt.Errorf("list purged inspector %s: %w", id, err)
		}
	}
	w.purged = nil
	for _, key := range w.activityOrder {
		if err := w.storeActivity(t, key); err != nil {
			return err
		}
	}
	w.activityOrder = nil
	for _, id := range w.storedOrder {
		if err := w.storeStored(t, id); err != nil {
			return err
		}
	}
	w.storedOrder = nil
	// Accounts exist before their Endpoints receive anything, so the
	// order of the batch does not matter here.
	for _, id := range w.accountOrder {
		am := w.accounts[id]
		if err := storeAccount(t, w.signups, id, am.bytes, am.deliveries); err != nil {
			return fmt.Errorf("store usage of account %s: %w", id, err)
		}
	}
	w.accountOrder = nil
	for _, key := range w.hourOrder {
		n := w.hours[key]
		if n == 0 {
			continue
		}
		if _, err := t.exec(qAccountHour, key.account, key.hour, n); err != nil {
			return fmt.Errorf("store deliveries of account %s by the hour: %w", key.account, err)
		}
		if n < 0 {
			if _, err := t.exec(qAccountHourGone, key.account, key.hour); err != nil {
				return fmt.Errorf("store deliveries of account %s by the hour: %w", key.account, err)
			}
		}
	}
	w.hourOrder = nil
	return nil
}

// committed updates the address and listeners caches.
func (w *addressesWriter) committed() {
	w.a.cache.committed(w.changed, w.activityStored, w.stored)
	if len(w.guests) > 0 {
		w.a.guests.moved(w.guests)
	}
	if len(w.accounts) > 0 {
		w.a.quotas.committed(nil, w.accounts)
	}
	if len(w.signups) > 0 {
		w.a.signups.moved(w.signups)
	}
	w.a.listeners.committed(w.sessions)
}
