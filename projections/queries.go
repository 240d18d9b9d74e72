package projections

import (
	"fmt"
	"slices"
	"strings"
)

// The writer's statements, prepared once at Open (see stmtCache). Every
// statement Run executes is listed in writeQueries.
const (
	qCheckpoint = `UPDATE checkpoint SET position = ?, event_id = ? WHERE id = 1`

	// Who owns a stream, for account_events (see batch.indexStream).
	qEndpointOwner = `SELECT account_id FROM endpoints WHERE id = ?`
	qDeliveryOwner = `SELECT account_id FROM deliveries WHERE id = ?`

	// Before its first request, an inspector's idle time runs from creation.
	qInspectorCreated = `INSERT INTO inspectors (id, created_at, last_activity_at, ttl_ms, position, smee, network)
		VALUES (?1, ?2, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO NOTHING`
	qInspectorExpired = `UPDATE inspectors SET expired = 1 WHERE id = ?`
	// A purge sets last activity to the decision's value: the deliveries
	// that moved it are gone from the log, and a rebuild must agree.
	qInspectorPurged = `UPDATE inspectors SET purged = 1, expired = 1, last_activity_at = ? WHERE id = ?`
	// A purged inspector is listed in inspectors_purging while it still
	// holds deliveries: asked once the batch's rows are written (flush),
	// and again as each of its deliveries is dropped.
	qInspectorPurging = `INSERT OR IGNORE INTO inspectors_purging (id)
		SELECT ?1 WHERE EXISTS (SELECT 1 FROM deliveries INDEXED BY deliveries_by_address WHERE address = ?1)`
	qInspectorPurgingDone = `DELETE FROM inspectors_purging WHERE id = ?1
		AND NOT EXISTS (SELECT 1 FROM deliveries INDEXED BY deliveries_by_address WHERE address = ?1)`
	// Stored bytes change by deltas, so the order of a batch's additions
	// and removals does not matter.
	qInspectorStored = `UPDATE inspectors SET stored_bytes = stored_bytes + ? WHERE id = ? RETURNING network`
	// qInspectorStreamBytes counts an event of the inspector's own stream
	// in its stored bytes, once.
	qInspectorStreamBytes = `UPDATE inspectors SET stored_bytes = stored_bytes + ?1, stream_revision = ?2
		WHERE id = ?3 AND stream_revision < ?2 RETURNING network`
	// A refusal count adds up; the position check makes applying it again
	// change nothing.
	// An inspector's refusal counts are kept for good, as its own stream
	// is: their bytes (?4) count in its stored bytes, once per event.
	qInspectorRefused = `UPDATE inspectors SET refused = refused + ?1, refused_position = ?2, stored_bytes = stored_bytes + ?4
		WHERE id = ?3 AND refused_position < ?2 RETURNING network`
	qEndpointRefused = `UPDATE endpoints SET refused = refused + ?1, refused_position = ?2
		WHERE id = ?3 AND refused_position < ?2`
	// A tombstone of a delivery stream drops its row and attempts.
	qDeliveryDropped = `DELETE FROM deliveries WHERE id = ? RETURNING position, address, kind, stored_bytes, account_id, updated_position, received_at`
	// An account's index loses the events of a deleted delivery stream, as
	// a rebuild never sees them: they lie between the delivery's first and
	// latest positions.
	qAccountEventsDropped = `DELETE FROM account_events WHERE account_id = ? AND position BETWEEN ? AND ? AND stream = ?`
	qAttemptsDropped      = `DELETE FROM attempts WHERE delivery_position = ?`
	qAttemptEditsDropped  = `DELETE FROM attempt_edits WHERE delivery_id = ?`
	qAttemptEditBody      = `INSERT INTO attempt_edits (delivery_id, attempt_id, body) VALUES (?1, ?2, ?3)
		ON CONFLICT (delivery_id, attempt_id) DO UPDATE SET body = excluded.body`
	// Activity only moves forward: occurred-at times of concurrent requests
	// need not follow log order. A batch runs it once per address, with the
	// latest time of its deliveries (see batch.activity).
	qInspectorActivity = `UPDATE inspectors SET last_activity_at = MAX(last_activity_at, ?) WHERE id = ?`

	// An account's stored bytes and deliveries change by deltas, like an
	// inspector's stored bytes.
	qDeliveryGrew = `UPDATE deliveries SET stored_bytes = stored_bytes + ? WHERE id = ?`
	// qAccountStored returns what says whether the account is in the
	// storage for sign-ups (storeAccount).
	qAccountStored = `UPDATE accounts SET stored_bytes = stored_bytes + ?1, deliveries = deliveries + ?2 WHERE id = ?3
		RETURNING origin, network, storage_quota`
	// qAccountPool reads what a quota change moves in or out of the
	// storage for sign-ups (accountsWriter.quotaSet).
	qAccountPool = `SELECT origin, network, storage_quota, stored_bytes FROM accounts WHERE id = ?`
	// qAccountStreamCounted is the last revision of an account's stream
	// whose bytes are counted; qAccountStreamCount counts more.
	qAccountStreamCounted = `SELECT revision FROM account_streams WHERE stream = ?`
	qAccountStreamCount   = `INSERT INTO account_streams (stream, account_id, revision, bytes) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (stream) DO UPDATE SET revision = ?3, bytes = bytes + ?4`
	qAccountQuota = `UPDATE accounts SET storage_quota = ?1, rate_quota = ?2, api_cost_quota = ?4 WHERE id = ?3`
	qAccountHour  = `INSERT INTO account_hours (account_id, hour, deliveries) VALUES (?1, ?2, ?3)
		ON CONFLICT (account_id, hour) DO UPDATE SET deliveries = deliveries + excluded.deliveries`
	qAccountHourGone = `DELETE FROM account_hours WHERE account_id = ?1 AND hour = ?2 AND deliveries = 0`
	qAccountCreated  = `INSERT INTO accounts (id, name, created_at, position, origin, network) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`
	// The bytes an account's streams counted before it existed: a password
	// sign-up claims its login first.
	qAccountStreamsBefore = `SELECT COALESCE(SUM(bytes), 0) FROM account_streams WHERE account_id = ?`
	qTokenIssued          = `INSERT INTO tokens (hash, token_id, account_id, issued_at, name, expires_at, member_id, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (hash) DO NOTHING`
	qTokenRevoked = `UPDATE tokens SET revoked = 1 WHERE account_id = ? AND token_id = ?`
	qTokenUsed    = `UPDATE tokens SET last_used = MAX(last_used, ?) WHERE account_id = ? AND token_id = ?`

	qDeviceRequested = `INSERT INTO device_codes (id, device_hash, user_hash, client_name, status, created_at, expires_at, network)
		VALUES (?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	qDeviceStatus = `UPDATE device_codes SET status = ?, account_id = ? WHERE id = ?`

	qInviteCreated = `INSERT INTO invites (id, code_hash, created_by, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT DO NOTHING`
	qInviteUsed = `UPDATE invites SET used_by = ? WHERE id = ?`

	qMemberJoined = `INSERT INTO members (member_id, account_id, login, login_key, role, password_hash, joined_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (member_id) DO NOTHING`
	qMemberRemoved    = `UPDATE members SET removed = 1 WHERE account_id = ? AND member_id = ?`
	qMemberRole       = `UPDATE members SET role = ? WHERE account_id = ? AND member_id = ?`
	qMemberPassword   = `UPDATE members SET password_hash = ? WHERE account_id = ? AND member_id = ?`
	qMemberInvited    = `INSERT INTO member_invites (id, account_id, code_hash, role, created_by, expires_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	qMemberInviteUsed = `UPDATE member_invites SET used_by = ? WHERE account_id = ? AND id = ?`
	qActivity         = `INSERT INTO activity (account_id, position, at, type, by_member, subject, detail) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	qTokenName        = `SELECT name FROM tokens WHERE account_id = ? AND token_id = ?`

	qEndpointCreated = `INSERT INTO endpoints (id, account_id, name, mode, target, response_capture,
			created_at, last_activity_at, position, updated_position, answers, filters, retention_ms, queue)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?8, ?9, ?10, ?11, ?12) ON CONFLICT (id) DO NOTHING`
	qEndpointReconfigured = `UPDATE endpoints SET name = ?, mode = ?, target = ?, response_capture = ?,
		updated_position = ?, answers = ?, filters = ?, retention_ms = ?, queue = ? WHERE id = ?`
	// A retention decision keeps the newest activity it saw: a rebuild
	// no longer has the deliveries that made it.
	qEndpointRetained = `UPDATE endpoints SET retained_to = MAX(retained_to, ?), last_activity_at = MAX(last_activity_at, ?) WHERE id = ?`
	qInspectorAnswers = `UPDATE inspectors SET answers = ? WHERE id = ?`
	qEndpointDeleted  = `UPDATE endpoints SET deleted = 1, updated_position = ? WHERE id = ?`
	qEndpointSmeeKey  = `UPDATE endpoints SET smee_key_hash = ?, updated_position = ? WHERE id = ?`
	qEndpointActivity = `UPDATE endpoints SET last_activity_at = MAX(last_activity_at, ?) WHERE id = ?`

	// A session ID seen again (a resumed session) is reopened, not counted twice.
	qAgentConnected = `INSERT INTO agent_sessions (agent_id, endpoint_id, target, connected_at, open, position, node, asked, filters)
		VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)
		ON CONFLICT (agent_id) DO UPDATE SET endpoint_id = excluded.endpoint_id, target = excluded.target,
			connected_at = excluded.connected_at, disconnected_at = NULL, reason = '', open = 1,
			position = excluded.position, node = excluded.node, asked = excluded.asked, filters = excluded.filters`
	qAgentDisconnected = `UPDATE agent_sessions SET open = 0, disconnected_at = ?, reason = ?
		WHERE agent_id = ? AND endpoint_id = ?`

	// The delivery updates mark a delivery as changed by the event at ?1 and
	// set what the sender was answered: the status of the latest attempt
	// that has an outcome and was requested after the latest
	// DeliveryAnswered (a retry), else the status the service answered
	// itself (?3 when not NULL is a new DeliveryAnswered status, recorded at
	// position ?6). An attempt requested before a DeliveryAnswered is one
	// whose sender was answered by the relay (a 504): its outcome, even one
	// that lands later, is what the local process answered too late, not
	// what the sender got. ?4 and ?5, when ?4 is not NULL, are the revision
	// and stream (NULL for the delivery's own) of a new latest
	// ForwardResponded. ?7 and ?8, with ?3, are the new DeliveryAnswered's
	// reason and time.
	//
	// qDeliveryUpdateByID finds the delivery by its id, for the first event
	// of a delivery the batch does not know yet; from then on the batch
	// knows its position (?2) and flush updates it by that, with others
	// (qDeliveriesUpdate).
	//
	// Each returns what the rollup counts the delivery by (statsReturning),
	// so that flush need not read the row again (statsWriter.counted); the
	// one by id also its owner, for account_events (txn.owned).
	qDeliveryUpdateByID = `UPDATE deliveries SET ` + deliveryUpdateSet + ` WHERE id = ?2 RETURNING position, account_id, ` + statsReturning

	// An attempt's rowid is its ForwardRequested position: attempts list in
	// time (log) order, and it starts when it was requested. The ...At
	// variants take the delivery's position (?2) instead of its id.
	// ?8 marks a copy, ?9 the session it was given to, ?10 an attempt from
	// a QUEUE Endpoint's queue, ?11 one sent as a possible duplicate.
	qAttemptRequested = `INSERT INTO attempts (position, delivery_position, attempt_id, retry, started_at, node, edit, copy, agent_id,
			queued, possible_duplicate)
		SELECT ?1, position, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11 FROM deliveries WHERE id = ?2 ` + attemptRequestedConflict
	qAttemptRequestedAt = `INSERT INTO attempts (position, delivery_position, attempt_id, retry, started_at, node, edit, copy, agent_id,
			queued, possible_duplicate)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ` + attemptRequestedConflict
	// An outcome whose ForwardRequested is missing still creates the attempt,
	// started at the outcome, so what the sender was answered is never lost.
	// ?4 is the outcome's time, ?8 the agent session it names, ?9 its
	// signature verdict, ?10 its fidelity, ?11 whether it is a copy (see the
	// attempts table).
	qAttemptOutcome = `INSERT INTO attempts (position, delivery_position, attempt_id, retry, started_at,
			status, duration_ms, error, outcome_position, agent_id, outcome_at, signature, fidelity, copy)
		SELECT ?1, position, ?3, 0, ?4, ?5, ?6, ?7, ?1, ?8, ?4, ?9, ?10, ?11 FROM deliveries WHERE id = ?2 ` + attemptOutcomeConflict
	// A delivery the batch created gets its final columns, computed in Go
	// (heldDelivery), by its position.
	qDeliveryHeld = `UPDATE deliveries SET updated_position = ?1, answered_status = ?2, answered_position = ?3,
			answered_reason = ?4, answered_at = ?5, response_status = ?6, response_stream = ?7, response_revision = ?8,
			stats_class = ?9
		WHERE position = ?10`
	qAttemptOutcomeAt = `INSERT INTO attempts (position, delivery_position, attempt_id, retry, started_at,
			status, duration_ms, error, outcome_position, agent_id, outcome_at, signature, fidelity, copy)
		VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?1, ?8, ?4, ?9, ?10, ?11) ` + attemptOutcomeConflict
)

const (
	deliveryUpdateNoOutcomeSet = `updated_position = ?1,
			answered_status = COALESCE(?3, answered_status),
			answered_position = COALESCE(?4, answered_position),
			answered_reason = COALESCE(?5, answered_reason),
			answered_at = COALESCE(?6, answered_at),
			response_status = COALESCE(?3, answered_status)`
	deliveryUpdateSet = `updated_position = ?1,
			answered_status = COALESCE(?3, answered_status),
			answered_position = COALESCE(?6, answered_position),
			answered_reason = COALESCE(?7, answered_reason),
			answered_at = COALESCE(?8, answered_at),
			response_status = COALESCE(
				(SELECT status FROM attempts WHERE delivery_position = deliveries.position
					AND outcome_position IS NOT NULL AND copy = 0
					AND position > COALESCE(?6, deliveries.answered_position, 0)
					ORDER BY position DESC LIMIT 1),
				?3, answered_status),
			response_stream = CASE WHEN ?4 IS NULL THEN response_stream ELSE ?5 END,
			response_revision = COALESCE(?4, response_revision)`
	// An outcome that came first made the attempt; its request still
	// brings the edit it sent and whether it came from the queue.
	attemptRequestedConflict = `ON CONFLICT (delivery_position, attempt_id) DO UPDATE SET edit = COALESCE(excluded.edit, edit),
			queued = excluded.queued, possible_duplicate = excluded.possible_duplicate`
	attemptOutcomeConflict = `ON CONFLICT (delivery_position, attempt_id) DO UPDATE SET status = excluded.status,
			duration_ms = excluded.duration_ms, error = excluded.error,
			outcome_position = excluded.outcome_position, agent_id = excluded.agent_id,
			outcome_at = excluded.outcome_at, signature = excluded.signature,
			fidelity = excluded.fidelity, copy = excluded.copy
		WHERE outcome_position IS NOT excluded.outcome_position`
)

// chunks are the row counts of the statements that take a batch's rows
// several at a time, largest first: a batch's rows go in as few
// statements as they make up.
var chunks = []int{32, 8, 1}

// chunk is the largest of chunks that n rows fill.
func chunk(n int) int {
	for _, c := range chunks {
		if c <= n {
			return c
		}
	}
	return 1
}

// execChunks runs rows through the statements queries holds for each size
// in chunks, the largest first, and returns the rows they changed.
func execChunks(t *txn, queries map[int]string, rows [][]any) (int64, error) {
	var changed int64
	for len(rows) > 0 {
		n := chunk(len(rows))
		args := make([]any, 0, n*len(rows[0]))
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		c, err := t.exec(queries[n], args...)
		if err != nil {
			return changed, err
		}
		changed += c
		rows = rows[n:]
	}
	return changed, nil
}

// qDeliveriesExisting finds which of n delivery ids have a row, by n in
// chunks.
var qDeliveriesExisting = byChunk(func(n int) string {
	return `SELECT id FROM deliveries WHERE id IN (` + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`
})

// qDeliveriesKnown reads what the batch needs of n deliveries by id, by n
// in chunks (historyWriter.prefetch).
var qDeliveriesKnown = byChunk(func(n int) string {
	return `SELECT id, position, address, account_id FROM deliveries WHERE id IN (` +
		strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + `)`
})

// qDeliveriesUpdate updates n deliveries the batch knows by position, by n
// in chunks: each row of arguments is deliveryUpdateSet's ?1 to ?8, ?2 the
// position. qDeliveriesUpdateNoOutcome is the same with
// deliveryUpdateNoOutcomeSet, for deliveries that have no attempt with an
// outcome (ones the batch created and gave none), so neither the attempts
// lookup nor a response can change them. Each returns the position with
// what the rollup counts a delivery by.
var (
	qDeliveriesUpdate = byChunk(func(n int) string {
		return updateFromValues(deliveryUpdateSet, 8, n)
	})
	qDeliveriesUpdateNoOutcome = byChunk(func(n int) string {
		return updateFromValues(deliveryUpdateNoOutcomeSet, 6, n)
	})
)

// updateFromValues is an update of deliveries with set, whose ?1 to ?cols
// become the columns of n rows of values, the row at position ?2.
func updateFromValues(set string, cols, n int) string {
	for i := cols; i >= 1; i-- { // ?10 before ?1, were there ten
		set = strings.ReplaceAll(set, fmt.Sprintf("?%d", i), fmt.Sprintf("v.column%d", i))
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return `UPDATE deliveries SET ` + set + ` FROM (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") +
		`) AS v WHERE deliveries.position = v.column2 RETURNING position, ` + statsReturning
}

// qAccountEvents inserts n account_events rows, by n in chunks.
var qAccountEvents = byChunk(func(n int) string {
	return multiRow(`INSERT INTO account_events (account_id, position, stream, revision)`, 4, n, ` ON CONFLICT DO NOTHING`)
})

// multiRow is an insert of n rows of cols, each "?", then tail.
func multiRow(head string, cols, n int, tail string) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return head + " VALUES " + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ") + tail
}

// byChunk is query(n) for each size in chunks.
func byChunk(query func(n int) string) map[int]string {
	out := map[int]string{}
	for _, n := range chunks {
		out[n] = query(n)
	}
	return out
}

// qAttemptsHeld inserts n held attempts (history_held.go), whole.
var qAttemptsHeld = byChunk(func(n int) string {
	return multiRow(`INSERT INTO attempts (position, delivery_position, attempt_id, retry, started_at, node, edit, copy, agent_id,
			queued, possible_duplicate, status, duration_ms, error, outcome_position, outcome_at, signature, fidelity)`, 18, n, "")
})

// qDeliveriesHeld inserts n deliveries the batch created, whole: their
// receipts' columns, then qDeliveryHeld's.
var qDeliveriesHeld = byChunk(func(n int) string {
	return multiRow(`INSERT INTO deliveries (position, id, address, kind, account_id, method, target,
			host, proto, remote_addr, body_size, complete, received_at, stream, revision,
			stored_bytes, request_bytes, provider, provider_event, provider_delivery_id,
			updated_position, answered_status, answered_position, answered_reason, answered_at,
			response_status, response_stream, response_revision, stats_class)`, 29, n, ` ON CONFLICT (id) DO NOTHING`)
})

var writeQueries = []string{
	qCheckpoint, qEndpointOwner, qDeliveryOwner,
	qInspectorCreated, qInspectorExpired, qInspectorActivity, qInspectorAnswers,
	qInspectorPurged, qInspectorPurging, qInspectorPurgingDone, qInspectorStored, qInspectorStreamBytes, qInspectorRefused, qEndpointRefused, qDeliveryDropped, qAttemptsDropped, qAttemptEditsDropped, qAttemptEditBody, qAccountEventsDropped,
	qAccountStored, qAccountPool, qAccountStreamCounted, qAccountStreamCount, qAccountQuota, qAccountHour, qAccountHourGone, qDeliveryGrew,
	qAccountCreated, qAccountStreamsBefore, qTokenIssued, qTokenRevoked, qTokenUsed, qDeviceRequested, qDeviceStatus, qInviteCreated, qInviteUsed,
	qMemberJoined, qMemberRemoved, qMemberRole, qMemberPassword, qMemberInvited, qMemberInviteUsed, qActivity, qTokenName,
	qEndpointCreated, qEndpointReconfigured, qEndpointRetained, qEndpointDeleted, qEndpointSmeeKey, qEndpointActivity,
	qAgentConnected, qAgentDisconnected,
	qDeliveryUpdateByID, qDeliveryHeld,
	qAttemptRequested, qAttemptRequestedAt, qAttemptOutcome, qAttemptOutcomeAt,
}

// allWriteQueries are the statements of every read model's writer, prepared
// once on the connection that writes the views.
func allWriteQueries() []string {
	out := slices.Concat(writeQueries, statsWriteQueries, queueWriteQueries)
	for _, n := range chunks {
		out = append(out, qAccountEvents[n], qDeliveriesExisting[n], qAttemptsHeld[n], qDeliveriesHeld[n], qStatsClassesSet[n],
			qDeliveriesKnown[n], qDeliveriesUpdate[n], qDeliveriesUpdateNoOutcome[n])
	}
	return out
}
