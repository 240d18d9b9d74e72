package ingress

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/handshake"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/internal/flight"
	"github.com/relayhq/relay/ratelimit"
)

// Defaults for a zero Config.
const (
	DefaultDomain         = "localhost"
	DefaultCaptureCap     = 256 << 10
	DefaultMaxBody        = 10 << 20
	DefaultForwardTimeout = 30 * time.Second
	DefaultMaxHeaders     = 200
	DefaultMaxHeaderBytes = 64 << 10
)

// Config tunes the public-address server.
type Config struct {
	Domain     string // public addresses are <id>.<Domain>; default "localhost"
	CaptureCap int64  // body bytes stored per delivery; default 256 KiB
	MaxBody    int64  // largest body forwarded in PROXY mode (413 beyond); default 10 MiB
	// ProxyBodyBudget bounds the memory all request bodies in flight hold
	// together: a proxied body is held whole until the local answer is
	// back, the stored part of a recorded one (RecordedBodyWeight times)
	// until its record is committed; a body that does not fit is answered
	// 503 with Retry-After. Default 256 MiB.
	ProxyBodyBudget int64
	ForwardTimeout  time.Duration // how long the local target may take; default 30 s
	// MaxHeaders and MaxHeaderBytes bound the headers stored per delivery:
	// header values, and bytes of names and values. The rest are counted
	// in the delivery's DroppedHeaders; a PROXY Endpoint still forwards
	// them. Defaults 200 and 64 KiB.
	MaxHeaders     int
	MaxHeaderBytes int64
	Logger         *slog.Logger // default discards
	// AddressRate limits requests per public address (zero: no limit);
	// beyond it the sender gets 429 and nothing is recorded, and the
	// refusals are counted in the log every RefusalInterval (default
	// DefaultRefusalInterval) by RecordRefusals.
	AddressRate     ratelimit.Rate
	RefusalInterval time.Duration
	// InspectorQuota bounds the log bytes an inspector's deliveries take
	// (0: no quota); beyond it the sender gets 429 and nothing is recorded.
	InspectorQuota int64
	// GuestStorage bounds the log bytes every guest inspector's deliveries
	// take together, and those of the inspectors one client network
	// created (a share of it); beyond, the sender gets 507 and nothing is
	// recorded. Endpoints are not affected.
	GuestStorage domain.GuestStorage
	// SignupStorage bounds the log bytes every account made by open
	// sign-up takes together (Route.InSignupStorage), and those the
	// accounts one client network signed up take (a share of it); beyond,
	// the sender to their Endpoints gets 507 and nothing is recorded.
	// Other accounts and guests are not affected.
	SignupStorage domain.SignupStorage
	// RequireHTTPS is set when public URLs are https: a request known to
	// have come over plain HTTP (on the relay's own TLS port or its
	// --http-listen, or marked so by a trusted proxy) is recorded and
	// answered 503 at an address, and redirected to ConsoleURL on the bare
	// domain (health and metrics routes excepted).
	RequireHTTPS bool
	// PublicURL is an address's public URL, named in the wrong-protocol
	// answer; ConsoleURL is the bare domain's ("https://relay.example.com").
	PublicURL  func(id string) string
	ConsoleURL string
	// ConsoleSite is the console's own URL when it has a host of its own
	// (--console-url, "https://console.example.com"): requests for that
	// host name are served by Deps.Console, whatever their port, and
	// redirected to ConsoleSite when it is https and they are known to be
	// plain. Empty: the console is on the bare domain.
	ConsoleSite string
	// MaxStreams bounds the smee streams open on the whole relay (see
	// smee.go for the other bounds); default DefaultMaxStreams.
	MaxStreams int
	// ReplayRate admits the replays of smee streams that reconnect with
	// Last-Event-ID, per client (smee.go); zero: DefaultReplayRate.
	ReplayRate ratelimit.Rate
	// MaxQueueBacklog bounds the deliveries a QUEUE Endpoint holds not yet
	// delivered nor dead (queue.go); beyond, 503 with Retry-After. Default
	// DefaultMaxQueueBacklog.
	MaxQueueBacklog int
}

// Deps are the components the server talks to. Recorder and Resolver are
// required; Forwarder is needed for PROXY Endpoints; Bare serves the bare
// domain (GraphQL, console). NewDeliveryID defaults to the Recorder's ID
// source, whose clock is the server's too.
type Deps struct {
	Recorder      Recorder
	Resolver      AddressResolver
	Forwarder     Forwarder
	Bare          http.Handler
	Console       http.Handler // the console's own host (Config.ConsoleSite)
	NewDeliveryID func() string
	// Secrets reads the addresses' stored handshake secrets (the relay's
	// secrets key); nil reads only plain ones from older events.
	Secrets handshake.Secrets
	// Feed serves smee-compatible addresses' streams (smee.go); nil
	// answers a stream request 503.
	Feed Feed
	// QueueDepth counts a QUEUE Endpoint's deliveries still to deliver;
	// nil: the backlog is not bounded.
	QueueDepth func(ctx context.Context, endpointID string) (int, error)
	// Bodies is the budget the forwarded bodies share (the queue's attempts
	// take from the same one); nil: one of Config.ProxyBodyBudget of its
	// own.
	Bodies *BodyBudget
	// Disk is the relay's reserve of free disk (withinDiskReserve); nil:
	// none.
	Disk *diskreserve.Reserve
}

// Server answers requests to public addresses. It is safe for concurrent use.
type Server struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	echo *echo.Echo

	bodies        *BodyBudget
	addressLimits *ratelimit.Keyed // nil without an address rate
	consoleName   string           // host name of Config.ConsoleSite; "" when none
	refused       refusals

	streams     streamSlots
	events      flight.Cache[string, smeeEncoded] // encoded smee events the streams share
	streamsDone chan struct{}                     // closed by StopStreams
	stopStreams sync.Once
	replays     *ratelimit.Keyed // per client: replays after Last-Event-ID

	accountLimits *ratelimit.Keyed // buckets at each account's own rate
	quotaRefused  quotaRefusals
	guestRefused  domain.GuestRefusals
	backlogs      backlogCache
}

// New builds the server; it starts nothing.
func New(cfg Config, deps Deps) *Server {
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.CaptureCap <= 0 {
		cfg.CaptureCap = DefaultCaptureCap
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = DefaultForwardTimeout
	}
	if cfg.ProxyBodyBudget <= 0 {
		cfg.ProxyBodyBudget = DefaultProxyBodyBudget
	}
	if cfg.MaxHeaders <= 0 {
		cfg.MaxHeaders = DefaultMaxHeaders
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RefusalInterval <= 0 {
		cfg.RefusalInterval = DefaultRefusalInterval
	}
	if deps.NewDeliveryID == nil && deps.Recorder != nil {
		deps.NewDeliveryID = deps.Recorder.NewID
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.ReplayRate.Off() {
		cfg.ReplayRate = DefaultReplayRate
	}
	if deps.Bodies == nil {
		deps.Bodies = newBodyBudget(cfg.ProxyBodyBudget, cfg.MaxBody)
	}
	s := &Server{cfg: cfg, deps: deps, log: cfg.Logger, bodies: deps.Bodies, addressLimits: newAddressLimits(cfg.AddressRate),
		accountLimits: newAccountLimits()}
	if u, err := url.Parse(cfg.ConsoleSite); err == nil && cfg.ConsoleSite != "" {
		s.consoleName = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	}
	s.backlogs.shared.Size = backlogCountsShared
	s.streams.max = cfg.MaxStreams
	s.streams.reserved = cfg.MaxStreams / StreamsReservedShare
	s.replays = ratelimit.NewKeyed(cfg.ReplayRate, maxLimitedAddresses)
	s.streamsDone = make(chan struct{})

	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.echoError
	// One handler for every method and path: Any covers Echo's known
	// methods, RouteNotFound every other method (Echo would answer 405), and
	// ServeHTTP the targets the router cannot match at all.
	e.Any("/*", s.serve)
	e.RouteNotFound("/*", s.serve)
	s.echo = e
	return s
}

// Handler is the http.Handler to mount on the public listener.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// serveHTTP serves a target the router cannot match at all ("*", an
// absolute-form target with an empty path), which Echo would answer 404,
// itself, and every other through Echo. A check here rather than an Echo
// Pre middleware: Echo builds a Pre middleware's chain again for every
// request (two allocations each).
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(echo.GetPath(r), "/") {
		_ = s.serve(s.echo.NewContext(r, w)) // serve answers every outcome itself
		return
	}
	s.echo.ServeHTTP(w, r)
}

// echoError is only reached if Echo itself produced an error, which the
// routes above prevent; it still answers without a 404.
func (s *Server) echoError(err error, c echo.Context) {
	s.log.ErrorContext(c.Request().Context(), "ingress: unexpected echo error", "error", err)
	if !c.Response().Committed {
		writeText(c.Response(), http.StatusInternalServerError, "Internal Server Error\n")
	}
}

// serve routes by Host and answers. It never returns an error: every
// outcome is written here, so Echo's error handler stays out of the way.
func (s *Server) serve(c echo.Context) error {
	w, r := c.Response(), c.Request()
	ctx := r.Context()
	if s.consoleHost(r.Host) {
		if !s.redirectToConsoleHTTPS(w, r) {
			s.deps.Console.ServeHTTP(w, r)
		}
		return nil
	}
	address, bare, ok := ParseHost(r.Host, s.cfg.Domain)
	plain := s.plainWhereHTTPSIsRequired(r)
	switch {
	case bare && plain && s.redirectToHTTPS(w, r):
		return nil
	case bare && s.deps.Bare != nil:
		s.deps.Bare.ServeHTTP(w, r)
		return nil
	case !ok || bare:
		writeNoAgent(w, "unknown address")
		return nil
	case s.deps.Recorder == nil || s.deps.Resolver == nil:
		s.log.ErrorContext(ctx, "ingress: no recorder or address resolver configured")
		writeNoAgent(w, "store unavailable")
		return nil
	}

	route, err := s.deps.Resolver.Resolve(ctx, address)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		writeNoAgent(w, "unknown address")
		return nil
	case err != nil:
		s.log.ErrorContext(ctx, "ingress: resolve address", "address", address, "error", err)
		writeNoAgent(w, "store unavailable")
		return nil
	}
	route.ID = address
	if route.Kind == domain.AddressInspector && route.Smee && !plain && wantsStream(r) {
		// Not a delivery: smee's client reading the address's stream. It
		// is not rate limited per request either: the stream bounds are
		// per address and relay-wide (smee.go).
		s.serveSmeeInspector(ctx, w, r, route)
		return nil
	}
	if route.Kind == domain.AddressEndpoint && !route.Deleted && !plain && wantsStream(r) && smeeKeyMatches(r, route.SmeeKeyHash) {
		s.serveSmee(ctx, w, r, route)
		return nil
	}
	if !s.limitAddress(w, route) {
		return nil
	}
	if !route.Deleted && !s.limitAccount(w, route) {
		return nil
	}
	if !route.Deleted && !s.withinDiskReserve(w, route) {
		return nil
	}

	switch {
	case route.Kind == domain.AddressInspector && plain:
		s.serveInspector(ctx, w, r, route, s.wrongProtocol(address))
	case route.Kind == domain.AddressInspector:
		s.serveInspector(ctx, w, r, route, answerNoContent)
	case route.Kind != domain.AddressEndpoint || route.Deleted:
		writeNoAgent(w, "unknown address")
	case plain:
		s.serveRecord(ctx, w, r, route, s.wrongProtocol(address))
	case route.Mode == domain.ModeProxy:
		s.serveProxy(ctx, w, r, route)
	case route.Mode == domain.ModeQueue:
		s.serveQueue(ctx, w, r, route)
	default:
		s.serveRecord(ctx, w, r, route, answerNoContent)
	}
	return nil
}

// logDelivery writes the one line every delivery gets.
func (s *Server) logDelivery(ctx context.Context, deliveryID, address, method string, status int) {
	if !s.log.Enabled(ctx, slog.LevelDebug) {
		return // its arguments would allocate for nothing
	}
	s.log.DebugContext(ctx, "delivery", "delivery_id", deliveryID, "address", address, "method", method, "status", status)
}
