package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
	"github.com/relayhq/relay/readmodel"
	"github.com/relayhq/relay/record"
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
	SignupOpen     bool
	// ViewsWait bounds how long a command waits for the views to show its
	// own change; beyond, it fails with domain.ErrUnavailable rather than
	// hang while the views are stuck (a full disk). 0 means DefaultViewsWait.
	ViewsWait time.Duration
	// MaxBody bounds the body an edited retry sends (the ingress's
	// --max-body); 0 means 10 MiB.
	MaxBody int64
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
}

// New wires a Service. store is read from; rec records its decisions.
func New(cfg Config, store domain.EventStore, rec *record.Recorder, views Views, fw Forwarder, presence Presence, log *slog.Logger) *Service {
	if cfg.ViewsWait <= 0 {
		cfg.ViewsWait = DefaultViewsWait
	}
	return &Service{cfg: cfg, store: store, rec: rec, codec: rec.Codec(), views: views, forwarder: fw, presence: presence, log: log, now: rec.Now}
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
	wctx, cancel := context.WithTimeout(ctx, s.cfg.ViewsWait)
	defer cancel()
	err := s.views.WaitFor(wctx, position)
	if err == nil {
		noteWrite(ctx, position)
	}
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
	id := NewAddressID()
	in, err := domain.NewInspector(id, s.cfg.InspectorTTL)
	if err != nil {
		return readmodel.Inspector{}, err
	}
	if _, err := s.append(ctx, domain.InspectorStream(id), in.Expected(), domain.Trace{CorrelationID: id}, in.Changes()); err != nil {
		return readmodel.Inspector{}, err
	}
	return s.views.Inspector(ctx, id)
}

// SignUp creates an account and returns its first token, which is never stored.
func (s *Service) SignUp(ctx context.Context, name string) (readmodel.Account, string, error) {
	if !s.cfg.SignupOpen {
		return readmodel.Account{}, "", &domain.InvalidInputError{Field: "signUp", Reason: "sign-up is closed on this relay; ask its operator for a token"}
	}
	return s.CreateAccount(ctx, name)
}

// CreateAccount creates an account whatever the sign-up setting (operators).
func (s *Service) CreateAccount(ctx context.Context, name string) (readmodel.Account, string, error) {
	id := NewEventID()
	token, hash := NewToken()
	a, err := domain.SignUp(id, name, NewEventID(), hash)
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
	if token == "" {
		return readmodel.Account{}, domain.ErrUnauthenticated
	}
	acc, err := s.views.AccountByTokenHash(ctx, HashToken(token))
	if errors.Is(err, domain.ErrNotFound) {
		return readmodel.Account{}, domain.ErrUnauthenticated
	}
	return acc, err
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

// CreateEndpoint opens an Endpoint for the account.
func (s *Service) CreateEndpoint(ctx context.Context, accountID string, set domain.EndpointSettings) (readmodel.Endpoint, error) {
	id := NewAddressID()
	ep, err := domain.NewEndpoint(id, accountID, set)
	if err != nil {
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
}

// UpdateEndpoint changes an Endpoint's settings; no change, no event.
func (s *Service) UpdateEndpoint(ctx context.Context, accountID, id string, p EndpointPatch) (readmodel.Endpoint, error) {
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		ep, err := s.loadEndpoint(ctx, accountID, id)
		if err != nil {
			return err
		}
		set := ep.Settings()
		if p.Name != nil {
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
		if p.Filters != nil {
			set.Filters = *p.Filters
		}
		if err := ep.Reconfigure(set); err != nil {
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
func (s *Service) DeleteEndpoint(ctx context.Context, accountID, id string) error {
	return conflict.Retry(ctx, conflictTries, func(int) error {
		ep, err := s.loadEndpoint(ctx, accountID, id)
		if err != nil {
			return err
		}
		if err := ep.Delete(); err != nil {
			return err
		}
		_, err = s.append(ctx, domain.EndpointStream(id), ep.Expected(), domain.Trace{CorrelationID: id}, ep.Changes())
		return err
	})
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
	set := ep.Settings()
	// The attempt is recorded without waiting for the views: nothing reads
	// them before the outcome, which is waited for below.
	cmd, err := s.rec.RequestRetry(ctx, deliveryID, record.RetryTarget{
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
