package projections

import (
	"context"
	"database/sql"
	"fmt"
)

// schemaVersion is stored in PRAGMA user_version. A views file written by
// another version is dropped and rebuilt from the log on Open: views are
// disposable, the log is the truth. Version 2 stopped copying headers and
// bodies out of the log; version 3 added the checkpoint's event ID (checked
// against the log at start), account_events, stored bytes, rate-limit
// refusals and purges; version 4 the node that holds each agent session and
// whose sender waits for each attempt; version 5 the position of a
// delivery's latest DeliveryAnswered, so that an outcome arriving after the
// sender was answered does not change what the row says it was answered;
// version 6 the edit an edited retry sent (attempts.edit), the provider a
// delivery came from with its own id of it (duplicates share one), and why
// and when the relay answered a sender itself, which agent session served
// each attempt and when its outcome came (what explanations read); version
// 7 the fidelity receipt's verdict of each attempt; version 8 an address's
// own answer and handshakes (answers); version 9 each token's name, expiry
// and last use, device codes and invites; version 10 which attempts are
// copies given to sessions other than the primary, and each Endpoint's
// filters; version 12 whether each agent session asked to be primary and
// its filters, so every node applies the primary rule and the filters to
// the sessions of every node; version 13 the members of accounts, their
// invites and activity, and each token's member and kind; version 14
// each Endpoint's retention window and the cutoff of its latest retention
// decision; version 15 the per-minute stats rollup (stats_minutes,
// stats_horizon) and the status class each delivery is counted under
// (deliveries.stats_class); version 16 whether an inspector is
// smee-compatible, and an Endpoint's smee key hash; version 17 each
// account's stored bytes, deliveries (also by the hour) and quota override;
// version 18 an account's API cost budget override (api_cost_quota);
// version 19 the queue of QUEUE Endpoints (queue, docs/queue.md); version
// 20 whether each attempt came from the queue and was sent as a possible
// duplicate (attempts.queued, attempts.possible_duplicate); version 21
// counts the answers attempts stored (forward.responded.v1) in each
// delivery's stored bytes, and so in its account's and inspector's;
// version 22 counts every other event of an account's streams (its
// account, token uses, Endpoints, agent sessions, refusal counts) in the
// account's stored bytes, and the client network that created each
// inspector (inspectors.network), whose own stream's bytes count in its
// stored bytes (inspectors.stream_revision); version 23 counts an
// inspector's refusal counts (its refusals- stream) in its stored bytes,
// indexes the device codes waiting for a decision, counts the logins an
// account claims and the invites it makes or is made by in its stored
// bytes, keeps how each account was made and the client network that
// signed up (accounts.origin, network), and each Endpoint's queue policy
// (endpoints.queue), so listing queues reads no stream; version 24 the
// client network that asked for each device code (device_codes.network),
// whose share of the codes waiting requestDeviceCode counts; version 25
// lists the purged inspectors that still hold deliveries
// (inspectors_purging), which the retention sweep reads instead of every
// address holding deliveries, and drops the index of purged inspectors,
// which nothing read; version 26 keeps an edited retry's body apart from
// its edit (attempt_edits, compressed), so that reading attempts reads no
// edited body, and the views hold it no larger than the log does; version
// 27 the bytes of each delivery's receipt apart from those of its answers
// (deliveries.request_bytes), so that a read of its request alone, or of
// its latest answer alone, reserves of an answer's log budget what it
// reads.
const schemaVersion = 27

// viewTables lists every table the package owns, for Rebuild and tests.
var viewTables = []string{
	"checkpoint", "inspectors", "inspectors_purging", "accounts", "account_hours", "tokens", "device_codes", "invites", "members", "member_invites", "activity", "endpoints",
	"agent_sessions", "deliveries", "attempts", "attempt_edits", "account_events", "account_streams", "stats_minutes", "stats_horizon", "queue",
}

// retiredTables were owned by older schema versions; dropping a view drops
// them too, so an old file does not keep its copies of bodies.
var retiredTables = []string{"delivery_bodies", "delivery_responses"}

// Times are INTEGER Unix nanoseconds (UTC) so they sort and compare exactly.
// Positions are INTEGER; deliveries and attempts use the position of the
// event that created them as rowid, which gives history its order for free.
var schemaSQL = `
-- event_id is the ID of the event at position: at start, the log must
-- hold that very event there, or the views describe another log.
CREATE TABLE IF NOT EXISTS checkpoint (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	position INTEGER NOT NULL,
	event_id TEXT    NOT NULL DEFAULT ''
);
INSERT OR IGNORE INTO checkpoint (id, position) VALUES (1, 0);

CREATE TABLE IF NOT EXISTS inspectors (
	id               TEXT PRIMARY KEY,
	created_at       INTEGER NOT NULL,
	last_activity_at INTEGER NOT NULL,
	ttl_ms           INTEGER NOT NULL,
	expired          INTEGER NOT NULL DEFAULT 0,
	position         INTEGER NOT NULL,
	-- stored_bytes sums deliveries.stored_bytes of its deliveries and the
	-- payload bytes of its own stream's events and of its refusal counts,
	-- kept for good (quota);
	-- refused counts requests its rate limit refused; purged: retention
	-- removed its deliveries. refused_position is the latest refusal
	-- count added, so a count applied again is not added twice.
	stored_bytes     INTEGER NOT NULL DEFAULT 0,
	refused          INTEGER NOT NULL DEFAULT 0,
	refused_position INTEGER NOT NULL DEFAULT 0,
	purged           INTEGER NOT NULL DEFAULT 0,
	-- answers: its own answer and handshakes, JSON (answersJSON); '' for none.
	answers          TEXT NOT NULL DEFAULT '',
	-- smee: the address also serves smee's event stream (docs/smee.md).
	smee             INTEGER NOT NULL DEFAULT 0,
	-- network: the client network that created it (IPv4 /24, IPv6 /48),
	-- '' for none known; its inspectors share a part of --guest-storage.
	network          TEXT NOT NULL DEFAULT '',
	-- stream_revision: the last event of its own stream whose bytes
	-- stored_bytes counts (an event applied again is not counted twice).
	stream_revision  INTEGER NOT NULL DEFAULT -1
);

-- inspectors_purging lists the purged inspectors whose deliveries
-- retention is still deleting, one row each until its last delivery is
-- dropped: the sweep reads these, not every address holding deliveries.
CREATE TABLE IF NOT EXISTS inspectors_purging (id TEXT PRIMARY KEY) WITHOUT ROWID;
-- inspectors_live lists the inspectors retention has not purged, by last
-- activity, for the sweep that looks for those past their retention: a
-- purged inspector keeps its row for good (its address is never handed
-- out again), and any stranger can create inspectors.
CREATE INDEX IF NOT EXISTS inspectors_live ON inspectors (last_activity_at) WHERE purged = 0;

-- stored_bytes sums deliveries.stored_bytes of the account's Endpoints'
-- deliveries and the payload bytes of every event of its other streams
-- (account, token uses, Endpoints, agent sessions, refusal counts), which
-- its storage quota counts; deliveries counts the deliveries.
-- Both go down when deliveries are deleted from the log, so the views
-- equal a rebuild.
-- storage_quota, rate_quota and api_cost_quota are the operator's override
-- (domain.AccountQuotaSet): -1, '' and '' for the relay's defaults.
CREATE TABLE IF NOT EXISTS accounts (
	id             TEXT PRIMARY KEY,
	name           TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	position       INTEGER NOT NULL,
	stored_bytes   INTEGER NOT NULL DEFAULT 0,
	deliveries     INTEGER NOT NULL DEFAULT 0,
	storage_quota  INTEGER NOT NULL DEFAULT -1,
	rate_quota     TEXT NOT NULL DEFAULT '',
	api_cost_quota TEXT NOT NULL DEFAULT '',
	-- origin and network: how the account was made and the client network
	-- that signed up (domain.AccountCreated); '' for older accounts. With
	-- storage_quota they say whether it counts in the storage for
	-- sign-ups (domain.InSignupStorage, networkUsage).
	origin         TEXT NOT NULL DEFAULT '',
	network        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS accounts_by_stored ON accounts (stored_bytes);

-- The deliveries of an account's Endpoints the log holds, by the hour they
-- were received (Unix hours): its usage sums the last day's rows, a read
-- of at most 25 rows however many deliveries there are. A row that falls
-- to 0 is deleted, as a rebuild would never have made it.
CREATE TABLE IF NOT EXISTS account_hours (
	account_id TEXT NOT NULL,
	hour       INTEGER NOT NULL,
	deliveries INTEGER NOT NULL,
	PRIMARY KEY (account_id, hour)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS tokens (
	hash       TEXT PRIMARY KEY,
	token_id   TEXT NOT NULL,
	account_id TEXT NOT NULL,
	revoked    INTEGER NOT NULL DEFAULT 0,
	issued_at  INTEGER NOT NULL,
	name       TEXT NOT NULL DEFAULT '',
	expires_at INTEGER NOT NULL DEFAULT 0, -- unix nanoseconds; 0: never
	last_used  INTEGER NOT NULL DEFAULT 0, -- unix nanoseconds; 0: never used
	member_id  TEXT NOT NULL DEFAULT '',   -- the member it acts for; '': none
	kind       TEXT NOT NULL DEFAULT ''    -- 'session' or '' (an API token)
);
CREATE INDEX IF NOT EXISTS tokens_by_id ON tokens (account_id, token_id);
-- tokens_live lists an account's tokens that are not revoked, in their
-- order, without walking its revoked ones: a revoked token keeps its row
-- for good, and every sign-in past a member's 20 sessions revokes one.
CREATE INDEX IF NOT EXISTS tokens_live ON tokens (account_id, issued_at, token_id) WHERE revoked = 0;

-- Device codes (RFC 8628) by the hashes of their two codes.
CREATE TABLE IF NOT EXISTS device_codes (
	id          TEXT PRIMARY KEY,
	device_hash TEXT NOT NULL,
	user_hash   TEXT NOT NULL,
	client_name TEXT NOT NULL,
	status      TEXT NOT NULL, -- pending, approved, denied, redeemed
	account_id  TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	expires_at  INTEGER NOT NULL,
	network     TEXT NOT NULL DEFAULT '' -- the client network that asked; '': unknown
);
CREATE INDEX IF NOT EXISTS device_codes_by_device ON device_codes (device_hash);
CREATE INDEX IF NOT EXISTS device_codes_by_user ON device_codes (user_hash, created_at);
-- The codes waiting for a decision, which requestDeviceCode counts.
CREATE INDEX IF NOT EXISTS device_codes_pending ON device_codes (expires_at) WHERE status = 'pending';
-- The codes of one client network waiting, which its share counts.
CREATE INDEX IF NOT EXISTS device_codes_pending_by_network ON device_codes (network, expires_at) WHERE status = 'pending';

-- Invites to sign up, by their code's hash.
CREATE TABLE IF NOT EXISTS invites (
	id         TEXT PRIMARY KEY,
	code_hash  TEXT NOT NULL UNIQUE,
	created_by TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	used_by    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS invites_by_creator ON invites (created_by, expires_at);

-- The members of accounts; login_key (the login without case) is unique
-- among current members (the login streams guarantee it). password_hash
-- is as the log holds it: sealed under the secrets key, or plain from
-- events written before hashes were sealed.
CREATE TABLE IF NOT EXISTS members (
	member_id     TEXT PRIMARY KEY,
	account_id    TEXT NOT NULL,
	login         TEXT NOT NULL,
	login_key     TEXT NOT NULL,
	role          TEXT NOT NULL,
	password_hash TEXT NOT NULL,
	joined_at     INTEGER NOT NULL,
	removed       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS members_by_login ON members (login_key) WHERE removed = 0;
CREATE INDEX IF NOT EXISTS members_by_account ON members (account_id, joined_at);
-- members_live lists an account's current members, in their order,
-- without walking its removed ones: a removed member keeps its row for
-- good, and an owner may invite and remove members without end.
CREATE INDEX IF NOT EXISTS members_live ON members (account_id, joined_at, member_id) WHERE removed = 0;

-- One-time links to join an account, by their code's hash.
CREATE TABLE IF NOT EXISTS member_invites (
	id         TEXT PRIMARY KEY,
	account_id TEXT NOT NULL,
	code_hash  TEXT NOT NULL,
	role       TEXT NOT NULL,
	created_by TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	used_by    TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS member_invites_by_code ON member_invites (code_hash);

-- Who changed what in an account (members, roles, invites, tokens), for
-- its owners.
CREATE TABLE IF NOT EXISTS activity (
	account_id TEXT    NOT NULL,
	position   INTEGER NOT NULL,
	at         INTEGER NOT NULL,
	type       TEXT    NOT NULL,
	by_member  TEXT    NOT NULL, -- '' unknown (a token without a member)
	subject    TEXT    NOT NULL, -- a member's or token's id, or an invite's
	detail     TEXT    NOT NULL, -- a role, a token's name
	PRIMARY KEY (account_id, position)
);

CREATE TABLE IF NOT EXISTS endpoints (
	id               TEXT PRIMARY KEY,
	account_id       TEXT NOT NULL,
	name             TEXT NOT NULL,
	mode             TEXT NOT NULL,
	target           TEXT NOT NULL,
	response_capture INTEGER NOT NULL,
	created_at       INTEGER NOT NULL,
	last_activity_at INTEGER NOT NULL,
	deleted          INTEGER NOT NULL DEFAULT 0,
	position         INTEGER NOT NULL,
	updated_position INTEGER NOT NULL,
	refused          INTEGER NOT NULL DEFAULT 0,
	refused_position INTEGER NOT NULL DEFAULT 0,
	answers          TEXT NOT NULL DEFAULT '',
	-- filters: the Endpoint's filters as JSON ('' for none).
	filters          TEXT NOT NULL DEFAULT '',
	-- retention_ms: its own retention window (0: the relay's default);
	-- retained_to: the cutoff of its latest retention decision (Unix
	-- nanoseconds, 0: none), deliveries received before it go.
	retention_ms     INTEGER NOT NULL DEFAULT 0,
	retained_to      INTEGER NOT NULL DEFAULT 0,
	-- smee_key_hash: SHA-256 of its smee stream key, hex ('' for none).
	smee_key_hash    TEXT NOT NULL DEFAULT '',
	-- queue: its queue policy as set, JSON ('' for the defaults).
	queue            TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS endpoints_by_account ON endpoints (account_id, position);
-- endpoints_live lists, counts and names an account's Endpoints that are
-- not deleted without walking its deleted ones: a deleted Endpoint keeps
-- its row for good, and an account may create and delete them as long as
-- its storage quota lasts.
CREATE INDEX IF NOT EXISTS endpoints_live ON endpoints (account_id, position) WHERE deleted = 0;

CREATE TABLE IF NOT EXISTS agent_sessions (
	agent_id        TEXT PRIMARY KEY,
	endpoint_id     TEXT NOT NULL,
	target          TEXT NOT NULL,
	connected_at    INTEGER NOT NULL,
	disconnected_at INTEGER,
	reason          TEXT NOT NULL DEFAULT '',
	open            INTEGER NOT NULL,
	position        INTEGER NOT NULL,
	node            TEXT NOT NULL DEFAULT '',
	-- asked: started with --primary; filters: its filters' text forms as a
	-- JSON array ('' for none).
	asked           INTEGER NOT NULL DEFAULT 0,
	filters         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS agent_sessions_by_endpoint ON agent_sessions (endpoint_id, open);
-- agent_sessions_open lists the sessions open now, in their order, without
-- walking those that ended: an ended session keeps its row for good, and
-- every agent's connection (relay listen, the desktop) leaves one.
CREATE INDEX IF NOT EXISTS agent_sessions_open ON agent_sessions (position) WHERE open = 1;
-- An explanation of a 503 "no agent connected" names the Endpoint's session
-- that started last before it.
CREATE INDEX IF NOT EXISTS agent_sessions_by_start ON agent_sessions (endpoint_id, connected_at);
-- Stats read the sessions open now and those that ended in their range.
CREATE INDEX IF NOT EXISTS agent_sessions_by_end ON agent_sessions (endpoint_id, disconnected_at);

-- Headers and bodies are not copied here: the row refers to the events that
-- hold them, read back from the log when a delivery is read. The request is
-- the DeliveryReceived at revision "revision" of stream "stream"; the latest
-- local response is the ForwardResponded at "response_revision" of
-- "response_stream" (NULL until there is one). A NULL stream is the
-- delivery's own stream (domain.DeliveryStream(id)), which it always is for
-- events the Delivery aggregate wrote.
CREATE TABLE IF NOT EXISTS deliveries (
	position          INTEGER PRIMARY KEY,
	id                TEXT NOT NULL UNIQUE,
	address           TEXT NOT NULL,
	kind              TEXT NOT NULL,
	account_id        TEXT NOT NULL,
	method            TEXT NOT NULL,
	target            TEXT NOT NULL,
	host              TEXT NOT NULL,
	proto             TEXT NOT NULL,
	remote_addr       TEXT NOT NULL,
	body_size         INTEGER NOT NULL,
	complete          INTEGER NOT NULL,
	received_at       INTEGER NOT NULL,
	answered_status   INTEGER,
	-- answered_position is the position of the latest DeliveryAnswered: the
	-- relay answered the sender itself (a 504 when no outcome came in
	-- time). Attempts requested before it no longer decide response_status,
	-- whenever their outcome lands: the sender did not get it.
	answered_position INTEGER,
	-- answered_reason and answered_at: why and when the relay answered the
	-- sender itself (at receipt, or in its latest DeliveryAnswered); '' and
	-- NULL while it has not.
	answered_reason   TEXT NOT NULL DEFAULT '',
	answered_at       INTEGER,
	response_status   INTEGER,
	stream            TEXT,
	revision          INTEGER NOT NULL,
	response_stream   TEXT,
	response_revision INTEGER,
	updated_position  INTEGER NOT NULL,
	-- stored_bytes is the size of the DeliveryReceived payload in the log
	-- (headers and body as stored) plus those of its attempts' answers
	-- (forward.responded.v1: headers and a captured body), what the
	-- storage quotas count.
	stored_bytes      INTEGER NOT NULL DEFAULT 0,
	-- request_bytes is the DeliveryReceived payload's alone (with the
	-- answer it records, when it records one: record.ReceiptHold), the
	-- part of stored_bytes a read of the request takes; 0 when unknown.
	request_bytes     INTEGER NOT NULL DEFAULT 0,
	-- The webhook provider recognised at receipt (domain.DetectProvider),
	-- its event type and its own id of the delivery; a provider that sends
	-- it again sends the same id.
	provider             TEXT,
	provider_event       TEXT,
	provider_delivery_id TEXT,
	-- stats_class is the status class (1 to 5, 0 for no answer yet) the
	-- delivery is counted under in stats_minutes; NULL until counted.
	stats_class          INTEGER
);
CREATE INDEX IF NOT EXISTS deliveries_by_address ON deliveries (address, position);
-- Retention finds an Endpoint's deliveries received before its cutoff
-- without reading the newer ones.
CREATE INDEX IF NOT EXISTS deliveries_by_received ON deliveries (address, received_at);
CREATE INDEX IF NOT EXISTS deliveries_by_provider_id ON deliveries (address, provider_delivery_id)
	WHERE provider_delivery_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS attempts (
	position          INTEGER PRIMARY KEY,
	delivery_position INTEGER NOT NULL,
	attempt_id        TEXT NOT NULL,
	retry             INTEGER NOT NULL,
	started_at        INTEGER NOT NULL,
	status            INTEGER,
	duration_ms       INTEGER,
	error             TEXT NOT NULL DEFAULT '',
	outcome_position  INTEGER,
	node              TEXT NOT NULL DEFAULT '',
	-- edit is the domain.RequestEdit an edited retry sent, as JSON, its
	-- body left out (attempt_edits holds it) and its size in body_size;
	-- NULL for an attempt sent as recorded.
	edit              TEXT,
	-- agent_id is the agent session its outcome names ('' when none took
	-- it); outcome_at is when the outcome was recorded.
	agent_id          TEXT NOT NULL DEFAULT '',
	outcome_at        INTEGER,
	-- signature is the verdict of a provider signature check the agent
	-- made on the developer's machine (relay listen --verify); NULL for none.
	signature         TEXT,
	-- fidelity compares the agent's receipt of what it handed to the local
	-- process with what the relay sent (domain.Fidelity): NULL when the
	-- agent reported none, '' when every part matched, else the parts that
	-- differ, comma-separated (request_line,headers,body).
	fidelity          TEXT,
	-- copy: given to a session that is not the primary (agent_id names
	-- it); a copy never decides what the sender was answered.
	copy              INTEGER NOT NULL DEFAULT 0,
	-- queued: sent by a QUEUE Endpoint's queue; possible_duplicate: sent
	-- again after an earlier attempt was left open (docs/queue.md).
	queued            INTEGER NOT NULL DEFAULT 0,
	possible_duplicate INTEGER NOT NULL DEFAULT 0,
	UNIQUE (delivery_position, attempt_id)
);

-- attempt_edits holds the body an edited retry sent instead of the
-- recorded one, compressed (S2), by its delivery and attempt: read only
-- when an edit's body is asked for, and removed with its delivery.
CREATE TABLE IF NOT EXISTS attempt_edits (
	delivery_id TEXT NOT NULL,
	attempt_id  TEXT NOT NULL,
	body        BLOB NOT NULL,
	PRIMARY KEY (delivery_id, attempt_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS attempts_open ON attempts (outcome_position) WHERE outcome_position IS NULL;
-- A filtered page tests each delivery it examines against its attempts
-- (attemptStatus: any attempt's status; refusedOffline: the latest
-- attempt's outcome): one seek each through these, where walking its
-- attempts made the page's work grow with them (up to 200 a delivery).
CREATE INDEX IF NOT EXISTS attempts_by_status ON attempts (delivery_position, status);
CREATE INDEX IF NOT EXISTS attempts_outcomes ON attempts (delivery_position, position) WHERE outcome_position IS NOT NULL;

-- Every event of a stream an account owns (its account, its Endpoints and
-- their agents, their deliveries), so the events query pages through an
-- account's own events without scanning the rest of the log.
CREATE TABLE IF NOT EXISTS account_events (
	account_id TEXT    NOT NULL,
	position   INTEGER NOT NULL,
	stream     TEXT    NOT NULL,
	revision   INTEGER NOT NULL,
	PRIMARY KEY (account_id, position)
) WITHOUT ROWID;

-- The streams an account owns besides its deliveries' (its account, token
-- uses, Endpoints, agent sessions, refusal counts, the logins it claimed,
-- the invites it made or was made by), kept for good: the
-- payload bytes of their events counted so far in the account's
-- stored_bytes, up to revision, so that an event applied again is not
-- counted twice.
CREATE TABLE IF NOT EXISTS account_streams (
	stream     TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL,
	revision   INTEGER NOT NULL,
	bytes      INTEGER NOT NULL
) WITHOUT ROWID;
-- What an account's streams counted before the account existed (a
-- password sign-up claims its login first), summed when it is created.
CREATE INDEX IF NOT EXISTS account_streams_by_account ON account_streams (account_id);
` + statsSchemaSQL

// migrate creates the schema, dropping views written by another schema
// version first. It returns whether the views were reset.
func migrate(ctx context.Context, db *sql.DB) (reset bool, err error) {
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if version != 0 && version != schemaVersion {
		if err := dropViews(ctx, tx); err != nil {
			return false, err
		}
		reset = true
	}
	if err := createViews(ctx, tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit migration: %w", err)
	}
	return reset, nil
}

func createViews(ctx context.Context, tx *sql.Tx) error {
	if _, err := tx.ExecContext(ctx, schemaSQL+queueSchemaSQL); err != nil {
		return fmt.Errorf("create views: %w", err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return nil
}

func dropViews(ctx context.Context, tx *sql.Tx) error {
	for _, t := range append(append([]string(nil), viewTables...), retiredTables...) {
		if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return fmt.Errorf("drop %s: %w", t, err)
		}
	}
	return nil
}
