package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
	"github.com/relayhq/relay/secrets"
)

// Forwarder takes one attempt of a delivery to its local target (the tunnel).
type Forwarder interface {
	Forward(ctx context.Context, cmd domain.ForwardCommand) (domain.ForwardOutcome, error)
}

// Presence tells how many agents serve an Endpoint right now.
type Presence interface {
	Connected(endpointID string) int
}

// Config holds the service's settings.
type Config struct {
	InspectorTTL   time.Duration
	ForwardTimeout time.Duration
	// Signup says who may sign up; empty: SignupOpen decides (true: open,
	// false: closed), as before modes existed.
	Signup     domain.SignupMode
	SignupOpen bool
	// ViewsWait bounds how long a command waits for the views to show its
	// own change; beyond, it fails with domain.ErrUnavailable rather than
	// hang while the views are stuck (a full disk). 0 means DefaultViewsWait.
	ViewsWait time.Duration
	// MaxBody bounds the body an edited retry sends (the ingress's
	// --max-body); 0 means 10 MiB.
	MaxBody int64
	// Secrets is the relay's secrets key: handshake secrets are recorded
	// only as its HMAC or sealed under it, password hashes only sealed.
	// Nil: an address cannot be given a secret, nor a member a password
	// (refused as UNAVAILABLE), rather than have it logged plain.
	Secrets *secrets.Key
	// Retention bounds Endpoints' retention windows and gives the default
	// (docs/retention.md); a zero Max or Min is not checked, a zero
	// Default keeps deliveries (no sweep removes any).
	Retention domain.RetentionLimits
	// Quotas are the relay's limits for accounts without an override.
	Quotas QuotaDefaults
	// MaxPendingDeviceCodes bounds the device codes waiting for a
	// decision at once on the relay; 0: domain.MaxPendingDeviceCodes.
	MaxPendingDeviceCodes int
	// GuestStorage bounds what guest inspectors store together, and per
	// client network (relay serve --guest-storage): past it no inspector is
	// created for that network (domain.SharedStorageError).
	GuestStorage domain.GuestStorage
	// SignupStorage bounds what the accounts made by open sign-up store
	// together, and per client network that signed up (relay serve
	// --signup-storage): past it no account is signed up from that
	// network, and such an account's settings are refused
	// (domain.SharedStorageError).
	SignupStorage domain.SignupStorage
	// MaxEndpoints bounds the Endpoints (not deleted) of one account; 0:
	// no limit.
	MaxEndpoints int
	// Disk is the relay's reserve of free disk: below twice it sign-ups,
	// inspectors and Endpoints are refused, below it retries and redrives
	// too (domain.DiskReserveError). Nil: no reserve.
	Disk *diskreserve.Reserve
	// Bodies is the memory budget forwarded requests share (the ingress's
	// --proxy-body-budget): a retry holds its request's size of it, under
	// its account's key, until its outcome is recorded (holdRetry). Nil:
	// none (tests).
	Bodies Bodies
}

// Bodies is the body budget (ingress.BodyBudget) as a retry takes from it.
type Bodies interface {
	Reserve(key string, n int64) bool
	Release(key string, n int64)
	// Share is the most one key may hold at once.
	Share() int64
}

// DefaultViewsWait is Config.ViewsWait's default: far above the few
// milliseconds the views take when healthy.
const DefaultViewsWait = 10 * time.Second

// Service executes commands. Reads that need no decision go straight to the
// projections from the API layer.
type Service struct {
	cfg       Config
	store     domain.EventStore // reads only; every write goes through rec
	rec       *record.Recorder
	codec     *domain.Codec
	views     Views
	forwarder Forwarder
	presence  Presence
	log       *slog.Logger
	now       func() time.Time

	// guestRefused counts what checkGuestStorage refused, for the metrics.
	guestRefused domain.GuestRefusals

	// used holds when this node last recorded each token's use, so that a
	// busy token costs one TokenUsed a minute, not one per request.
	usedMu sync.Mutex
	used   map[string]time.Time
	// polls holds when each device code was last polled on this node, for
	// RFC 8628's slow_down.
	pollMu sync.Mutex
	polls  map[string]time.Time
	// pollsKept is how many polls the last sweep of polls kept; pollSweeps
	// counts the sweeps.
	pollsKept, pollSweeps int
	// retainedAfter is the last Endpoint a retention sweep decided on: the
	// next sweep goes on after it, so the Endpoints sorting first cannot
	// take every sweep's decisions.
	retainMu      sync.Mutex
	retainedAfter string
	// deletedAfter is the Endpoint whose deliveries the last page of
	// deletions ended with: the next page goes on after it, so one
	// Endpoint's backlog does not hold the others' deletions.
	deletedAfter string
}

// New wires a Service. store is read from; rec records its decisions.
func New(cfg Config, store domain.EventStore, rec *record.Recorder, views Views, fw Forwarder, presence Presence, log *slog.Logger) *Service {
	if cfg.ViewsWait <= 0 {
		cfg.ViewsWait = DefaultViewsWait
	}
	return &Service{cfg: cfg, store: store, rec: rec, codec: rec.Codec(), views: views, forwarder: fw, presence: presence, log: log, now: rec.Now,
		used: map[string]time.Time{}, polls: map[string]time.Time{}}
}

// append records an aggregate's new events (the first causes the others),
// then waits until the projections have applied them (read-your-writes).
func (s *Service) append(ctx context.Context, stream string, expected domain.ExpectedRevision, tr domain.Trace, events []domain.Event) (uint64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	res, err := s.rec.Record(ctx, stream, expected, tr, events...)
	if err != nil {
		return 0, err
	}
	if err := s.waitForViews(ctx, res.Position); err != nil {
		return 0, err
	}
	return res.Position, nil
}

// waitForViews waits, up to cfg.ViewsWait, until the views reflect
// position (read-your-writes); beyond, domain.ErrUnavailable.
func (s *Service) waitForViews(ctx context.Context, position uint64) error {
	err := s.viewsAt(ctx, position)
	if err == nil {
		noteWrite(ctx, position)
	}
	return err
}

// readCurrent waits, as waitForViews does, until the views have applied
// everything the log held when it was called. A read that must agree with
// a decision taken at the log's commit calls it first: the storage quota
// counts a receipt from its commit, the views a moment later.
func (s *Service) readCurrent(ctx context.Context) error {
	last, err := s.store.LastPosition(ctx)
	if err != nil {
		return fmt.Errorf("read last position: %w", err)
	}
	return s.viewsAt(ctx, last)
}

// viewsAt waits, up to cfg.ViewsWait, until the views reflect position;
// beyond, domain.ErrUnavailable.
func (s *Service) viewsAt(ctx context.Context, position uint64) error {
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ViewsWait)
	defer cancel()
	err := s.views.WaitFor(wctx, position)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		h := s.views.Health()
		return fmt.Errorf("%w: views at %d, waited %s for %d (last failure: %v)", domain.ErrUnavailable, h.Position, s.cfg.ViewsWait, position, h.Err)
	}
	if err != nil {
		return fmt.Errorf("wait for projections: %w", err)
	}
	return nil
}

// load reads a whole stream and decodes its events; an empty stream is
// ErrNotFound to callers.
func (s *Service) load(ctx context.Context, stream string) ([]domain.Event, error) {
	_, events, err := domain.LoadStream(ctx, s.store, s.codec, stream)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return nil, domain.ErrNotFound
	}
	return events, err
}

// CreateInspector opens a guest inspector.
func (s *Service) CreateInspector(ctx context.Context) (readmodel.Inspector, error) {
	return s.CreateInspectorWith(ctx, domain.InspectorOptions{})
}

// guestViews tells what guest inspectors store, in all and those made
// from one client network (projections.Addresses.GuestStored).
type guestViews interface {
	GuestStored(network string) (total, ofNetwork int64)
}

// checkGuestStorage refuses what would add to the guests' part of the log
// once they hold the relay's storage for guests, or the inspectors created
// from network hold its share (domain.SharedStorageError). Views that keep
// no such sums check nothing.
func (s *Service) checkGuestStorage(network string) error {
	gv, ok := s.views.(guestViews)
	if !ok {
		return nil
	}
	total, ofNetwork := gv.GuestStored(network)
	err := s.cfg.GuestStorage.Check(total, ofNetwork, network)
	s.guestRefused.Count(err)
	return err
}

// GuestRefusals returns what the storage for guests refused through the
// API on this node (createInspector, /new, setInspectorAnswer), by reason
// (domain.GuestRefusedBudget, domain.GuestRefusedNetwork).
func (s *Service) GuestRefusals() map[string]int64 { return s.guestRefused.Counts() }

// CreateInspectorWith opens a guest inspector with options (a
// smee-compatible one, docs/smee.md; the client network asking), unless
// the guests, or the inspectors of that network, hold the relay's storage
// for guests (domain.SharedStorageError).
func (s *Service) CreateInspectorWith(ctx context.Context, o domain.InspectorOptions) (readmodel.Inspector, error) {
	if err := s.checkDisk(diskreserve.Low); err != nil {
		return readmodel.Inspector{}, err
	}
	if err := s.checkGuestStorage(o.Network); err != nil {
		return readmodel.Inspector{}, err
	}
	id := NewAddressID()
	in, err := domain.NewInspectorWith(id, s.cfg.InspectorTTL, o)
	if err != nil {
		return readmodel.Inspector{}, err
	}
	if _, err := s.append(ctx, domain.InspectorStream(id), in.Expected(), domain.Trace{CorrelationID: id}, in.Changes()); err != nil {
		return readmodel.Inspector{}, err
	}
	return s.views.Inspector(ctx, id)
}

// SetInspectorAnswers changes a guest inspector's own answer (nil: kept;
// a 204 with nothing else resets it) and handshakes. Whoever knows the
// inspector's address may, as they may read it, unless the guests hold
// the relay's storage for guests or its network its share.
func (s *Service) SetInspectorAnswers(ctx context.Context, id string, answer *domain.Answer, hp *HandshakesPatch) (readmodel.Inspector, error) {
	if domain.ValidateAddressID(id) != nil {
		return readmodel.Inspector{}, domain.ErrNotFound
	}
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		events, err := s.load(ctx, domain.InspectorStream(id))
		if err != nil {
			return err
		}
		in := domain.LoadInspector(events)
		// Its stream is kept for good and counted in its stored bytes,
		// and so in the guests' storage and its network's share.
		if err := s.checkGuestStorage(in.Network()); err != nil {
			return err
		}
		a, h := in.Answers()
		if answer != nil {
			a = answer
		}
		h, err = s.sealSecrets(hp.apply(h))
		if err != nil {
			return err
		}
		if err := in.SetAnswers(a, h); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.InspectorStream(id), in.Expected(), domain.Trace{CorrelationID: id}, in.Changes())
		return err
	})
	if err != nil {
		return readmodel.Inspector{}, err
	}
	return s.views.Inspector(ctx, id)
}

// signupMode is the sign-up mode in force.
func (s *Service) signupMode() domain.SignupMode {
	switch {
	case s.cfg.Signup != "":
		return s.cfg.Signup
	case s.cfg.SignupOpen:
		return domain.SignupOpen
	}
	return domain.SignupClosed
}

// SignupMode says who may sign up on this relay.
func (s *Service) SignupMode() domain.SignupMode { return s.signupMode() }

// signupViews tells what the accounts made by open sign-up store, in all
// and those one client network signed up
// (projections.Accounts.SignupStored).
type signupViews interface {
	SignupStored(network string) (total, ofNetwork int64)
}

// checkSignupStorage refuses an open sign-up from network, or what would
// add to the log for an account made by one, once those accounts hold the
// relay's storage for sign-ups or network's share of it
// (domain.SharedStorageError). Views that keep no such sums check nothing.
func (s *Service) checkSignupStorage(network string) error {
	return overSignupStorage(s.views, s.cfg.SignupStorage, network)
}

// overSignupStorage is checkSignupStorage with the views and the bound
// given, for the checks that run outside a Service (StorageRefusal). It
// reads the views' in-memory sums, never the log.
func overSignupStorage(views any, g domain.SignupStorage, network string) error {
	sv, ok := views.(signupViews)
	if !ok {
		return nil
	}
	total, ofNetwork := sv.SignupStored(network)
	return g.Check(total, ofNetwork, network)
}

// SignUp creates an account and returns its first token, which is never
// stored. On a relay whose sign-up is by invite, invite is the code of an
// unused invite, which it spends; an open relay ignores it, and records
// network, the client network asking ("" for none known), which then
// holds a share of the relay's storage for sign-ups: refused once its
// accounts hold it (domain.SharedStorageError).
func (s *Service) SignUp(ctx context.Context, name, invite, network string) (readmodel.Account, string, error) {
	if err := s.checkDisk(diskreserve.Low); err != nil {
		return readmodel.Account{}, "", err
	}
	switch s.signupMode() {
	case domain.SignupOpen:
		if err := s.checkSignupStorage(network); err != nil {
			return readmodel.Account{}, "", err
		}
		return s.createAccount(ctx, name, domain.AccountFrom{Origin: domain.AccountOriginOpen, Network: network})
	case domain.SignupInvite:
		return s.signUpByInvite(ctx, name, invite)
	}
	return readmodel.Account{}, "", &domain.InvalidInputError{Field: "signUp", Reason: "sign-up is closed on this relay; ask its operator for a token"}
}

// signUpByInvite spends the invite (its stream's revision makes that
// single), then creates the account it was spent on.
func (s *Service) signUpByInvite(ctx context.Context, name, invite string) (readmodel.Account, string, error) {
	if strings.TrimSpace(invite) == "" {
		return readmodel.Account{}, "", &domain.InvalidInputError{Field: "invite", Reason: "sign-up on this relay is by invite: ask an account holder or the operator for one"}
	}
	id := NewEventID()
	token, hash := NewToken()
	a, err := domain.SignUp(id, name, NewEventID(), hash, domain.AccountFrom{Origin: domain.AccountOriginInvite}) // refuse a bad name before the invite is spent
	if err != nil {
		return readmodel.Account{}, "", err
	}
	if err := s.spendInvite(ctx, id, invite); err != nil {
		return readmodel.Account{}, "", err
	}
	if _, err := s.append(ctx, domain.AccountStream(id), a.Expected(), domain.Trace{CorrelationID: id}, a.Changes()); err != nil {
		return readmodel.Account{}, "", err
	}
	acc, err := s.views.Account(ctx, id)
	return acc, token, err
}

// CreateInvite makes a one-time invite to sign up, valid for lifetime (at
// most domain.InviteLifetime; 0: that long); createdBy is the inviting
// account, "" for the operator. The code is returned once.
func (s *Service) CreateInvite(ctx context.Context, createdBy string, lifetime time.Duration) (string, time.Time, error) {
	if lifetime <= 0 {
		lifetime = domain.InviteLifetime
	}
	if err := domain.CheckInviteLifetime(lifetime, domain.InviteLifetime); err != nil {
		return "", time.Time{}, err
	}
	random, _ := NewToken()
	code := "rin_" + strings.TrimPrefix(random, "rly_")
	id := NewEventID()
	expires := s.now().Add(lifetime)
	v, err := domain.CreateInvite(id, HashToken(code), createdBy, expires)
	if err != nil {
		return "", time.Time{}, err
	}
	if _, err := s.append(ctx, domain.InviteStream(id), v.Expected(), domain.Trace{CorrelationID: id}, v.Changes()); err != nil {
		return "", time.Time{}, err
	}
	return code, expires, nil
}

// CreateAccount creates an account whatever the sign-up setting
// (operators); it is outside the relay's storage for sign-ups.
func (s *Service) CreateAccount(ctx context.Context, name string) (readmodel.Account, string, error) {
	return s.createAccount(ctx, name, domain.AccountFrom{Origin: domain.AccountOriginOperator})
}

// createAccount creates an account made as from says.
func (s *Service) createAccount(ctx context.Context, name string, from domain.AccountFrom) (readmodel.Account, string, error) {
	id := NewEventID()
	token, hash := NewToken()
	a, err := domain.SignUp(id, name, NewEventID(), hash, from)
	if err != nil {
		return readmodel.Account{}, "", err
	}
	if _, err := s.append(ctx, domain.AccountStream(id), a.Expected(), domain.Trace{CorrelationID: id}, a.Changes()); err != nil {
		return readmodel.Account{}, "", err
	}
	acc, err := s.views.Account(ctx, id)
	return acc, token, err
}

// Authenticate returns the account a token acts for.
func (s *Service) Authenticate(ctx context.Context, token string) (readmodel.Account, error) {
	acc, _, err := s.AuthenticateToken(ctx, token)
	return acc, err
}

// AuthenticateToken returns the account a token acts for and the token;
// unknown, revoked and expired tokens are ErrUnauthenticated alike. It
// records the token's use at most once a minute (see TokenUsed).
func (s *Service) AuthenticateToken(ctx context.Context, token string) (readmodel.Account, readmodel.Token, error) {
	if token == "" {
		return readmodel.Account{}, readmodel.Token{}, domain.ErrUnauthenticated
	}
	acc, tok, err := s.views.TokenByHash(ctx, HashToken(token))
	if errors.Is(err, domain.ErrNotFound) {
		return readmodel.Account{}, readmodel.Token{}, domain.ErrUnauthenticated
	}
	if err != nil {
		return readmodel.Account{}, readmodel.Token{}, err
	}
	now := s.now()
	if tok.Expired(now) {
		return readmodel.Account{}, readmodel.Token{}, domain.ErrUnauthenticated
	}
	s.noteUse(ctx, tok, now)
	return acc, tok, nil
}

// tokenUseEvery is how stale a token's last use may be before a use is
// recorded again.
const tokenUseEvery = time.Minute

// noteUse records a token's use when neither the views nor this node have
// seen one within tokenUseEvery. A failure to record is logged, never a
// refusal: the request itself was authenticated.
func (s *Service) noteUse(ctx context.Context, tok readmodel.Token, now time.Time) {
	if now.Sub(tok.LastUsed) < tokenUseEvery {
		return
	}
	s.usedMu.Lock()
	if now.Sub(s.used[tok.ID]) < tokenUseEvery {
		s.usedMu.Unlock()
		return
	}
	if len(s.used) > 100_000 { // bound the memory of a node serving many tokens
		clear(s.used)
	}
	s.used[tok.ID] = now
	s.usedMu.Unlock()
	e := domain.TokenUsed{AccountID: tok.AccountID, TokenID: tok.ID, At: now.UTC().Format(time.RFC3339Nano)}
	// Its own stream: no decision reads a use, so the account's stream,
	// which every command reads, holds none.
	if _, err := s.rec.Record(context.WithoutCancel(ctx), domain.TokenUseStream(tok.AccountID), domain.Any(),
		domain.Trace{CorrelationID: tok.AccountID}, e); err != nil {
		s.log.WarnContext(ctx, "record token use", "account", tok.AccountID, "token_id", tok.ID, "error", err)
	}
}

// loadAccount returns an account's aggregate, folded from its stream's
// newest snapshot (domain.LoadStreamTail): every command of the account
// reads it, so it must not read the account's whole history. When many
// events follow that snapshot it appends another first, at the revision it
// read; if the stream moved on meanwhile, the next command takes it. A
// stream written before snapshots is read whole once.
func (s *Service) loadAccount(ctx context.Context, accountID string) (*domain.Account, error) {
	stream := domain.AccountStream(accountID)
	recs, events, err := domain.LoadStreamTail(ctx, s.store, s.codec, stream, domain.TypeAccountSnapshot)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return nil, domain.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	last := recs[len(recs)-1].Revision
	a := domain.LoadAccountTail(events, last)
	snap, due := a.Snapshot(s.now())
	if !due {
		return a, nil
	}
	_, err = s.rec.Record(ctx, stream, domain.Exact(last), domain.Trace{CorrelationID: accountID}, snap)
	switch {
	case err == nil:
		return domain.LoadAccountTail([]domain.Event{snap}, last+1), nil
	case errors.Is(err, domain.ErrWrongExpectedRevision):
		return a, nil
	default:
		// The command goes on from what it read: a snapshot only saves
		// the next command's reading.
		s.log.WarnContext(ctx, "record account snapshot", "account", accountID, "error", err)
		return a, nil
	}
}

// CreateToken issues a new token of the account, named (a device, say),
// expiring after lifetime (0: never). The token is returned once and only
// its hash is recorded.
func (s *Service) CreateToken(ctx context.Context, accountID, name string, lifetime time.Duration) (readmodel.Token, string, error) {
	return s.issueToken(ctx, accountID, NewEventID(), name, lifetime, accountID, "", "")
}

// CreateMemberToken is CreateToken for a member, who made it and for
// whom it acts ("" for a token without a member).
func (s *Service) CreateMemberToken(ctx context.Context, accountID, memberID, name string, lifetime time.Duration) (readmodel.Token, string, error) {
	return s.issueToken(ctx, accountID, NewEventID(), name, lifetime, accountID, memberID, "")
}

// issueToken is CreateToken with the token's id and the correlation id
// given (a device code's, for the token it receives).
func (s *Service) issueToken(ctx context.Context, accountID, id, name string, lifetime time.Duration, correlation, memberID, kind string) (readmodel.Token, string, error) {
	if err := domain.ValidateTokenName(name); err != nil {
		return readmodel.Token{}, "", err
	}
	token, hash := NewToken()
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		var expires time.Time
		if lifetime > 0 {
			expires = s.now().Add(lifetime)
		}
		if err := a.IssueMemberToken(id, hash, name, expires, memberID, kind); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: correlation}, a.Changes())
		return err
	})
	if err != nil {
		return readmodel.Token{}, "", err
	}
	_, tok, err := s.views.TokenByHash(ctx, hash)
	return tok, token, err
}

// RevokeToken stops one of the account's tokens on every node; another
// account's token id is ErrNotFound, exactly like an unknown one.
func (s *Service) RevokeToken(ctx context.Context, accountID, tokenID string) error {
	return s.RevokeTokenBy(ctx, accountID, "", tokenID)
}

// RevokeTokenBy is RevokeToken naming the member who revokes ("" unknown).
func (s *Service) RevokeTokenBy(ctx context.Context, accountID, by, tokenID string) error {
	return conflict.Retry(ctx, conflictTries, func(int) error {
		a, err := s.loadAccount(ctx, accountID)
		if err != nil {
			return err
		}
		if err := a.RevokeTokenBy(by, tokenID); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.AccountStream(accountID), a.Expected(), domain.Trace{CorrelationID: accountID}, a.Changes())
		return err
	})
}

// loadEndpoint returns an Endpoint the account owns; anything else is NotFound,
// so another account's ids look exactly like unknown ids.
func (s *Service) loadEndpoint(ctx context.Context, accountID, id string) (*domain.Endpoint, error) {
	if domain.ValidateAddressID(id) != nil {
		return nil, domain.ErrNotFound
	}
	events, err := s.load(ctx, domain.EndpointStream(id))
	if err != nil {
		return nil, err
	}
	ep := domain.LoadEndpoint(events)
	if !ep.OwnedBy(accountID) {
		return nil, domain.ErrNotFound
	}
	return ep, nil
}

// CreateEndpoint opens an Endpoint for the account, unless the account is
// past its storage quota (its settings count in its stored bytes).
func (s *Service) CreateEndpoint(ctx context.Context, accountID, by string, set domain.EndpointSettings) (readmodel.Endpoint, error) {
	if err := s.checkDisk(diskreserve.Low); err != nil {
		return readmodel.Endpoint{}, err
	}
	if err := s.checkEndpointCap(ctx, accountID); err != nil {
		return readmodel.Endpoint{}, err
	}
	if err := s.checkEndpointName(ctx, accountID, set.Name, ""); err != nil {
		return readmodel.Endpoint{}, err
	}
	id := NewAddressID()
	hs, err := s.sealSecrets(set.Handshakes)
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	set.Handshakes = hs
	if err := s.checkRetention(set.Retention); err != nil {
		return readmodel.Endpoint{}, err
	}
	ep, err := domain.NewEndpoint(id, accountID, by, set)
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	if err := s.checkStorage(ctx, accountID); err != nil {
		return readmodel.Endpoint{}, err
	}
	if _, err := s.append(ctx, domain.EndpointStream(id), ep.Expected(), domain.Trace{CorrelationID: id}, ep.Changes()); err != nil {
		return readmodel.Endpoint{}, err
	}
	return s.views.Endpoint(ctx, id)
}

// EndpointPatch holds the fields to change; nil leaves a field as it is.
type EndpointPatch struct {
	Name            *string
	Mode            *domain.EndpointMode
	Target          *string
	ResponseCapture *bool
	Filters         *[]domain.Filter // non-nil: replaces them (empty: none)
	// Answer replaces the Endpoint's own answer (a 204 with nothing else
	// resets it); Handshakes changes the fields it sets.
	Answer     *domain.Answer
	Handshakes *HandshakesPatch
	// Retention replaces the Endpoint's own window (0: the relay's default).
	Retention *time.Duration
	// Queue changes the fields of the queue policy it sets.
	Queue *QueuePatch
}

// HandshakesPatch holds the handshake settings to change; nil leaves a
// field as it is, so a secret need not be given again to change the list.
type HandshakesPatch struct {
	Enabled         *[]domain.Handshake
	MetaVerifyToken *string
	ZoomSecret      *string
	InProxy         *domain.HandshakeSide
}

// Settings are the handshakes the patch sets on an address that has none.
func (p *HandshakesPatch) Settings() *domain.Handshakes { return p.apply(nil) }

// apply returns h changed by the patch (nil: none set).
func (p *HandshakesPatch) apply(h *domain.Handshakes) *domain.Handshakes {
	if p == nil {
		return h
	}
	var out domain.Handshakes
	if h != nil {
		out = *h
	}
	if p.Enabled != nil {
		out.Enabled = *p.Enabled
	}
	// A secret given replaces the one set, in whichever form it is kept.
	if p.MetaVerifyToken != nil {
		out.MetaVerifyToken, out.MetaVerifyTokenMAC = *p.MetaVerifyToken, ""
	}
	if p.ZoomSecret != nil {
		out.ZoomSecret, out.ZoomSecretSealed = *p.ZoomSecret, ""
	}
	if p.InProxy != nil {
		out.InProxy = *p.InProxy
	}
	return &out
}

// onlyRetention reports whether the patch changes nothing but the
// retention window, which an account past its storage quota may still
// change (a shorter window frees its space).
func (p EndpointPatch) onlyRetention() bool {
	return p.Name == nil && p.Mode == nil && p.Target == nil && p.ResponseCapture == nil && p.Filters == nil &&
		p.Answer == nil && p.Handshakes == nil && p.Queue == nil
}

// UpdateEndpoint changes an Endpoint's settings; no change, no event. Its
// settings are kept in the log for good and counted in the account's
// stored bytes: past its storage quota only a change of the retention
// window is taken (domain.StorageQuotaError otherwise).
func (s *Service) UpdateEndpoint(ctx context.Context, accountID, by, id string, p EndpointPatch) (readmodel.Endpoint, error) {
	if !p.onlyRetention() {
		if err := s.checkStorage(ctx, accountID); err != nil {
			return readmodel.Endpoint{}, err
		}
	}
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		ep, err := s.loadEndpoint(ctx, accountID, id)
		if err != nil {
			return err
		}
		set := ep.Settings()
		if p.Name != nil && *p.Name != set.Name {
			if err := s.checkEndpointName(ctx, accountID, *p.Name, id); err != nil {
				return err
			}
			set.Name = *p.Name
		}
		if p.Mode != nil {
			set.Mode = *p.Mode
		}
		if p.Target != nil {
			set.Target = *p.Target
		}
		if p.ResponseCapture != nil {
			set.ResponseCapture = *p.ResponseCapture
		}
		if p.Answer != nil {
			set.Answer = p.Answer
		}
		if set.Handshakes, err = s.sealSecrets(p.Handshakes.apply(set.Handshakes)); err != nil {
			return err
		}
		if p.Filters != nil {
			set.Filters = *p.Filters
		}
		if p.Retention != nil {
			if err := s.checkRetention(*p.Retention); err != nil {
				return err
			}
			set.Retention = *p.Retention
		}
		if set.Queue, err = p.Queue.Apply(set.Queue); err != nil {
			return err
		}
		if err := ep.Reconfigure(by, set); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.EndpointStream(id), ep.Expected(), domain.Trace{CorrelationID: id}, ep.Changes())
		return err
	})
	if err != nil {
		return readmodel.Endpoint{}, err
	}
	return s.views.Endpoint(ctx, id)
}

// DeleteEndpoint closes an Endpoint; its address answers 503 from then on.
func (s *Service) DeleteEndpoint(ctx context.Context, accountID, by, id string) error {
	return conflict.Retry(ctx, conflictTries, func(int) error {
		ep, err := s.loadEndpoint(ctx, accountID, id)
		if err != nil {
			return err
		}
		if err := ep.Delete(by); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.EndpointStream(id), ep.Expected(), domain.Trace{CorrelationID: id}, ep.Changes())
		return err
	})
}

// RetentionLimits are the relay's bounds and default of Endpoints'
// retention windows.
func (s *Service) RetentionLimits() domain.RetentionLimits { return s.cfg.Retention }

// checkRetention refuses an Endpoint's own window the relay does not
// allow; 0 (the relay's default) is always allowed.
func (s *Service) checkRetention(w time.Duration) error {
	if w == 0 {
		return nil
	}
	return s.cfg.Retention.Check(w)
}

// conflictTries bounds how often a command decides again after another
// writer appended to the same stream between its read and its append.
const conflictTries = 20

// RetryDelivery replays a stored delivery to the local target as a new
// attempt, changed by edit when it is not nil, and returns the delivery
// once that attempt has an outcome. A bad edit is refused before anything
// is recorded.
func (s *Service) RetryDelivery(ctx context.Context, accountID, deliveryID string, edit *domain.RequestEdit) (readmodel.Delivery, error) {
	if edit != nil {
		maxBody := s.cfg.MaxBody
		if maxBody <= 0 {
			maxBody = 10 << 20
		}
		if err := edit.Check(maxBody); err != nil {
			return readmodel.Delivery{}, err
		}
	}
	// The owner check needs the row only; the request itself comes from the
	// delivery's stream below.
	view, err := s.views.DeliverySummary(ctx, deliveryID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return readmodel.Delivery{}, domain.ErrNotFound // as for another account's
	case err != nil:
		return readmodel.Delivery{}, err
	case view.Kind == domain.AddressInspector:
		return readmodel.Delivery{}, domain.ErrRetryNotProxy // inspectors never forward
	case view.AccountID != accountID:
		return readmodel.Delivery{}, domain.ErrNotFound
	}
	ep, err := s.loadEndpoint(ctx, accountID, view.Address)
	if err != nil {
		return readmodel.Delivery{}, err
	}
	// An attempt stores its answer: not for an account at its quota.
	if err := s.checkStorage(ctx, accountID); err != nil {
		return readmodel.Delivery{}, err
	}
	set := ep.Settings()
	// The request is held from here until its outcome is recorded, for as
	// long as the local process takes: within the account's share of the
	// body budget, as PROXY bodies and queued attempts are.
	release, err := s.holdRetry(accountID, view.BodySize, edit)
	if err != nil {
		return readmodel.Delivery{}, err
	}
	defer release()
	// The attempt is recorded without waiting for the views: nothing reads
	// them before the outcome, which is waited for below.
	cmd, err := s.requestRetry(ctx, deliveryID, record.RetryTarget{
		AccountID:       accountID,
		Endpoint:        domain.EndpointStatus{Mode: set.Mode, AgentConnected: s.presence.Connected(ep.ID()) > 0},
		EndpointID:      ep.ID(),
		CaptureResponse: set.ResponseCapture,
		Timeout:         s.cfg.ForwardTimeout,
		Edit:            edit,
	})
	if err != nil {
		return readmodel.Delivery{}, err
	}
	// The forwarder bounds its own wait (the forward timeout and the time
	// to record the outcome), so no shorter deadline is set here.
	out, err := s.forwarder.Forward(ctx, cmd)
	release()
	if err != nil {
		s.log.WarnContext(ctx, "retry forward", "delivery_id", deliveryID, "error", err)
	}
	// The outcome is recorded; make sure the view has it. Without
	// its position (no outcome, or none recorded) the end of the log covers it.
	seen := out.Position
	if seen == 0 {
		if seen, err = s.store.LastPosition(ctx); err != nil {
			return readmodel.Delivery{}, fmt.Errorf("retry: %w", err)
		}
	}
	if err := s.waitForViews(ctx, seen); err != nil {
		return readmodel.Delivery{}, fmt.Errorf("retry: %w", err)
	}
	return s.views.Delivery(ctx, deliveryID)
}

// requestRetry records a retry's request: the recorder reads the
// delivery, decides and appends at the revision it read, reading and
// deciding again (up to its 20 tries) when another writer appended
// first. The retries of one delivery on this node take turns at it with
// the delivery's copies being recorded (record.Recorder.Turn), each for
// the time of one read and one append, not of their forwards: together
// they refused one another's appends, one winner a round, and ran out of
// tries (domain.ErrWrongExpectedRevision, CONFLICT to the API) though
// every one could be recorded: with 9 listeners, 16 at once in 4 runs of
// 20, 64 at once 17 to 44 of them in every run. What a request still
// meets (the first outcomes of the retries before it, which take no turn,
// another node's writers) outlasted those tries too, rarely (1 of 64 at
// once in a loaded run, with a turn of the retries' own): it is then read
// and decided again, up to retryRequestRounds times, before CONFLICT.
func (s *Service) requestRetry(ctx context.Context, deliveryID string, t record.RetryTarget) (domain.ForwardCommand, error) {
	end, err := s.rec.Turn(ctx, deliveryID)
	if err != nil {
		return domain.ForwardCommand{}, fmt.Errorf("retry %s: %w", deliveryID, err)
	}
	defer end()
	var cmd domain.ForwardCommand
	err = conflict.Retry(ctx, retryRequestRounds, func(int) error {
		var err error
		cmd, err = s.rec.RequestRetry(ctx, deliveryID, t)
		return err
	})
	return cmd, err
}

// retryRequestRounds bounds how often a retry's request is recorded again
// once the recorder's own tries all met another writer.
const retryRequestRounds = 3

// RetryHeadBytes is what a retry's request line and headers are taken to
// hold beside its body: the most the ingress stores of a request's head
// by default (--max-header-bytes, 64 KiB). With it every retry holds part
// of the body budget, however small its body, so an account's retries out
// at once are bounded too, not only their bodies.
const RetryHeadBytes = 64 << 10

// ErrRetryBodyBudget refuses a retry whose request does not fit in what
// its account's retries may hold of the body budget while they are out
// (a quarter; Config.Bodies). It is domain.ErrUnavailable: once one of
// them has its outcome, the same retry passes.
var ErrRetryBodyBudget = fmt.Errorf("%w: the retries this account has out hold its share of the relay's body budget (a quarter of --proxy-body-budget) until their local process answers; try again once one has its answer", domain.ErrUnavailable)

// holdRetry takes what a retry holds of the body budget while it is out:
// the body it sends (the edit's, else the recorded one of bodySize bytes)
// and RetryHeadBytes, under its account's key, within one key's share. It
// returns what gives it back (once, however often called). Without it,
// each retry held its request for up to --forward-timeout outside any
// budget, and one account's concurrent retries (100 on each of an
// address's 32 sockets, from any number of addresses) held as many
// requests as it sent.
func (s *Service) holdRetry(accountID string, bodySize int64, edit *domain.RequestEdit) (release func(), err error) {
	b := s.cfg.Bodies
	if b == nil {
		return func() {}, nil
	}
	if edit != nil && edit.Body != nil {
		bodySize = int64(len(*edit.Body))
	}
	key, n := "retry "+accountID, min(max(bodySize, 0)+RetryHeadBytes, b.Share())
	if !b.Reserve(key, n) {
		return nil, ErrRetryBodyBudget
	}
	return sync.OnceFunc(func() { b.Release(key, n) }), nil
}
