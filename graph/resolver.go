package graph

import (
	"log/slog"
	"sync"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/internal/flight"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/tunnel"
)

// Resolver holds the API's dependencies; resolvers only adapt between
// GraphQL and these.
type Resolver struct {
	Service *commands.Service
	Views   Views
	Log     commands.EventLog
	Hub     tunnel.Sessions
	// PublicURL turns an address id into its public URL.
	PublicURL func(id string) string
	Logger    *slog.Logger
	// Quotas reads accounts' usage; QuotaRefusals counts the requests this
	// node refused an account by its quota, by reason (nil: none).
	Quotas        QuotaViews
	QuotaRefusals func(accountID string) map[string]int64
	// APICost is the relay's --account-api-cost: the cost points an
	// account's operations may spend (apicost.go); Off: none unless the
	// operator set one for the account.
	APICost ratelimit.Rate
	// AdminToken, when set, lets the operator read the whole event log.
	AdminToken string
	// Anonymous limits the mutations anyone may call without a token
	// (createInspector, signUp) per client address; nil: no limit.
	Anonymous *ratelimit.Keyed
	// AnonymousNetworks limits the same mutations per client network (an
	// IPv4 /24, an IPv6 /48: clientkey.Network), at AnonymousNetworkShare
	// times Anonymous's rate and burst, since one /48 is 65 536 client
	// addresses; nil: no limit.
	AnonymousNetworks *ratelimit.Keyed
	// SignInRate bounds sign-in attempts per login (and four times as many
	// per client address); zero: DefaultSignInRate (see NoSignInLimit).
	SignInRate ratelimit.Rate
	// InviteRate bounds the sign-up invites one account makes; zero:
	// DefaultInviteRate.
	InviteRate ratelimit.Rate
	// SessionRate bounds the agent sessions one account starts (and four
	// times as many per client address); zero: DefaultSessionRate.
	SessionRate ratelimit.Rate
	// BulkRate admits the calls of one account's bulk mutations, those
	// that append up to commands.MaxRedrive events each (redriveDead,
	// redriveDeadPage); zero: DefaultBulkRate.
	BulkRate ratelimit.Rate
	// TokenRate admits the tokens one account makes and revokes
	// (createToken, revokeToken: one bucket); zero: DefaultTokenRate.
	TokenRate ratelimit.Rate
	// NoSignInLimit turns the sign-in limits off (--signin-rate off).
	NoSignInLimit bool
	// ConsoleURL is the console's own URL (--console-url), which the links
	// the API returns start with; empty: they are paths on the relay's URL.
	ConsoleURL string
	// SearchLimits bound the searches that read headers and bodies from
	// the log, per account (or anonymous address) and in all (searchlimit.go).
	SearchLimits SearchLimits
	// ReplayRate admits the replays of deliveries subscriptions with since,
	// per account or client address (readers.go); zero: smee's
	// ingress.DefaultReplayRate.
	ReplayRate ratelimit.Rate
	// Now is the clock that decides whether an idle inspector has expired;
	// time.Now when nil.
	Now func() time.Time

	// inviteLimit holds the invite rate's buckets, made on first use.
	inviteOnce  sync.Once
	inviteLimit *ratelimit.Keyed
	// deviceLimit holds DeviceDecisionRate's buckets, made on first use.
	deviceOnce  sync.Once
	deviceLimit *ratelimit.Keyed
	// failedAuth holds FailedAuthRate's buckets, made on first use.
	failedOnce                          sync.Once
	failedAuth                          *ratelimit.Keyed
	signIn                              signInLimits
	apiCost                             apiCostGate
	searches                            searchGate
	sessionsByAccount, sessionsByClient rateGate
	bulk                                rateGate
	tokenChanges                        rateGate
	compares                            compareGate
	replays                             rateGate
	passwords                           passwordGate
	// endpointsListed is Limits.Endpoints as NewHandler was given it: the
	// most rows the endpoints list reads and is priced at (endpointRows).
	endpointsListed int
	// captureCap is Limits.CaptureCap as NewHandler was given it: the
	// most a stored request body holds (storedBodies).
	captureCap int64
	// answerLogBytes is Limits.AnswerLogBytes as NewHandler was given it:
	// the log one answer's reads of stored requests and answers may read
	// (withLogBudget).
	answerLogBytes int64
	// liveRows are the rows the deliveries subscriptions share (liveRow).
	liveRows flight.Cache[liveRowKey, *model.Delivery]
	// watching counts the deliveries subscriptions of each address.
	watching clientkey.Counter
}

func (r *Resolver) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}
