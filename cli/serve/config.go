package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"

	"github.com/relayhq/relay/app"
	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/cluster"
	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/domain/duration"
	"github.com/relayhq/relay/graph"
	"github.com/relayhq/relay/ingress"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/internal/datalock"
	"github.com/relayhq/relay/internal/diskreserve"
	"github.com/relayhq/relay/internal/forwarded"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/tunnel"
)

// byteSize is the commands' size flag (cmdutil.ByteSize).
type byteSize = cmdutil.ByteSize

// sizeOrOff is a size flag that also takes "off" (no limit, stored as 0).
type sizeOrOff struct{ byteSize }

func (q *sizeOrOff) String() string {
	if q.byteSize == 0 {
		return "off"
	}
	return q.byteSize.String()
}

func (q *sizeOrOff) Set(s string) error {
	if s == "off" {
		q.byteSize = 0
		return nil
	}
	return q.byteSize.Set(s)
}

// defaultMemoryLimit keeps an attacked relay's garbage in check: the GC
// target is high (see serve), and under a flood of large answers the heap
// would otherwise grow to several times what is live (docs/security.md).
const defaultMemoryLimit = 160 << 20

// Defaults of the limits on anonymous use; docs/security.md explains them.
var (
	defaultAnonymousRate = ratelimit.Rate{N: 30, Per: time.Hour, Burst: 10}
	defaultAddressRate   = ratelimit.Rate{N: 50, Per: time.Second, Burst: 100}
)

// Defaults of --account-storage and --account-rate while anyone may sign
// up (--signup open): far above what a small team stores in a retention
// window or sends at once, low enough that a stranger's account cannot
// take the disk or the node's ingest. With invite or closed sign-up the
// operator vouches for every account, and both are off.
// docs/security.md ("Accounts of strangers") gives the arithmetic.
var (
	defaultOpenAccountStorage int64 = 1 << 30
	defaultOpenAccountRate          = ratelimit.Rate{N: 100, Per: time.Second, Burst: 1000}
)

// serveConfig is everything `relay serve` is told.
type serveConfig struct {
	Listen            string
	Domain            string
	Data              string
	EventStore        string
	InspectorTTL      time.Duration
	CaptureCap        byteSize
	MaxBody           byteSize
	ForwardTimeout    time.Duration
	QueueBacklog      int
	Signup            signupFlag
	AdminToken        string
	LogLevel          string
	PublicPort        int
	ShutdownGrace     time.Duration
	KeepAlive         time.Duration
	ViewsWait         time.Duration
	IdleTimeout       time.Duration
	BodyTimeout       time.Duration
	MaxConnsPerIP     int
	MaxConnsPerNet    int
	MaxRequestsPerIP  int
	MaxRequestsPerNet int
	MaxHeaders        int
	MaxHeaderBytes    byteSize
	CPUProfile        string
	Trace             string
	MemProfile        string
	MaxAPIBody        byteSize
	MaxAPIAnswer      byteSize
	ProxyBodies       byteSize
	APIAnswers        byteSize
	MaxQueryCost      int
	MaxQueryFields    int
	MaxQueryTokens    int

	// headerTimeout is how long a client may take to send a request line
	// and its headers: defaultHeaderTimeout, not a flag; tests lower it.
	headerTimeout time.Duration

	AnonymousRate   ratelimit.Rate
	SignInRate      ratelimit.Rate
	AddressRate     ratelimit.Rate
	RefusalInterval time.Duration
	InspectorQuota  sizeOrOff
	GuestStorage    sizeOrOff
	// SignupStorage is --signup-storage as given (a size, a percentage of
	// the file system under --data, or off); signupStorageSet tells
	// whether it was, and signupStorageBytes is it in bytes, resolved at
	// start (resolveSignupStorage).
	SignupStorage      diskLimit
	signupStorageSet   func() bool
	signupStorageBytes int64
	AccountStorage     sizeOrOff
	MinFreeDisk        diskLimit
	AccountRate        ratelimit.Rate
	AccountAPICost     ratelimit.Rate
	AccountEndpoints   int
	InspectorRetention time.Duration
	// Retention is the Endpoints' default window, MaxRetention and
	// MinRetention the bounds of their own (docs/retention.md).
	Retention, MaxRetention, MinRetention time.Duration
	maxRetentionSet                       func() bool
	// openQuotas are AccountStorage and AccountRate when sign-up is open
	// and neither is given (flag or RELAY_*); accountStorageSet and
	// accountRateSet tell whether they were.
	openQuotas                        commands.QuotaDefaults
	accountStorageSet, accountRateSet func() bool
	// CheckpointInterval and CheckpointKey: see app.Config.
	CheckpointInterval time.Duration
	CheckpointKey      string
	// SecretsKey: see app.Config.
	SecretsKey string
	// WebSocket bounds (see docs/security.md, "WebSocket subscriptions").
	MaxWSMessage       byteSize
	MaxWSSubscriptions int
	MaxWSPerIP         int
	MaxWSPerNet        int
	// Open agent sessions (see docs/security.md, "Agent sessions").
	MaxEndpointSessions, MaxAccountSessions int
	// MemoryLimit is the Go heap's soft limit (see serve).
	MemoryLimit sizeOrOff

	// TLS and deployment behind a proxy (docs/deploy.md).
	TLSCert, TLSKey     string
	TLSReloadInterval   time.Duration
	TLSHandshakeTimeout time.Duration
	HTTPListen          string
	PublicURL           string
	ConsoleURL          string
	TrustedProxies      string

	// Derived by validate.
	publicURL *url.URL          // parsed --public-url; nil when unset
	console   *url.URL          // parsed --console-url; nil when unset
	trusted   forwarded.Trusted // parsed --trusted-proxies
	// domainSet tells whether --domain (or RELAY_DOMAIN) was given.
	domainSet func() bool
	// Several nodes (docs/scale-out.md): the bus between them, this node's
	// name and how long a silent node keeps its lease.
	Bus       string
	NodeID    string
	NodeLease time.Duration
}

func (c *serveConfig) flags(fs *pflag.FlagSet) {
	c.CaptureCap = 256 << 10
	c.MaxBody = 10 << 20
	c.MaxHeaderBytes = 64 << 10
	c.MaxAPIBody = graph.DefaultMaxBody
	c.MaxAPIAnswer, c.APIAnswers = graph.DefaultMaxAnswer, graph.DefaultAnswerBudget
	c.ProxyBodies = ingress.DefaultProxyBodyBudget
	c.AnonymousRate, c.AddressRate = defaultAnonymousRate, defaultAddressRate
	c.SignInRate = graph.DefaultSignInRate
	c.InspectorQuota = sizeOrOff{64 << 20}
	c.GuestStorage = sizeOrOff{DefaultGuestStorage}
	c.MaxWSMessage = 1 << 20
	c.MemoryLimit = sizeOrOff{defaultMemoryLimit}
	c.MinFreeDisk = diskLimit(diskreserve.DefaultLimit)
	c.headerTimeout = defaultHeaderTimeout
	c.openQuotas = commands.QuotaDefaults{Storage: defaultOpenAccountStorage, Rate: defaultOpenAccountRate}
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.Domain, "domain", "localhost", "public domain; addresses are <id>.<domain>, the console is on the bare domain")
	fs.StringVar(&c.Data, "data", "./relay-data", "folder for the event log and the views")
	fs.StringVar(&c.EventStore, "eventstore", "", "event log: nats://host:4222 (JetStream; comma-separated cluster seeds), esdb://host:2113?tls=false (EventStoreDB); empty: the embedded log under --data")
	fs.Var(duration.NewFlag(&c.InspectorTTL, 24*time.Hour), "inspector-ttl", "a guest inspector expires after this long without a request")
	fs.Var(&c.CaptureCap, "capture-cap", "bytes of each request body stored; larger bodies are marked incomplete")
	fs.Var(&c.MaxBody, "max-body", "largest body forwarded in proxy mode (413 beyond); at most 16MiB, which bounds the log's largest event")
	fs.Var(duration.NewFlag(&c.ForwardTimeout, 30*time.Second), "forward-timeout", "how long a forward may take before the sender gets 504")
	fs.IntVar(&c.QueueBacklog, "queue-backlog", ingress.DefaultMaxQueueBacklog, "deliveries a QUEUE Endpoint holds not yet delivered (503 beyond; docs/queue.md), 1 to 10000000")
	c.Signup = signupFlag(domain.SignupOpen)
	fs.Var(&c.Signup, "signup", "who may sign up: open (anyone), invite (with an invite an account or the operator made: createInvite, relay accounts invite) or closed (the operator: relay accounts create); true and false mean open and closed")
	fs.StringVar(&c.AdminToken, "admin-token", "", "token that reads the whole event log through the events query (operators and auditors)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error (debug logs one line per delivery)")
	fs.IntVar(&c.PublicPort, "public-port", 0, "port in public URLs when a proxy in front listens elsewhere (default: the listen port)")
	fs.Var(duration.NewFlag(&c.ShutdownGrace, 30*time.Second), "shutdown-grace", "how long SIGTERM waits for in-flight requests")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (for performance work)")
	_ = fs.MarkHidden("cpuprofile")
	fs.StringVar(&c.Trace, "trace", "", "write an execution trace of the whole run to this file (for latency work)")
	_ = fs.MarkHidden("trace")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write what the whole run allocated, by place, to this file at exit (for performance work)")
	_ = fs.MarkHidden("memprofile")
	fs.Var(duration.NewFlag(&c.IdleTimeout, 60*time.Second), "idle-timeout", "an idle keep-alive connection is closed after this long")
	fs.Var(duration.NewFlag(&c.BodyTimeout, 30*time.Second), "body-timeout", "a request body or response that makes no progress for this long ends its connection (over HTTP/2, a response held by flow control ends its stream)")
	fs.IntVar(&c.MaxConnsPerIP, "max-conns-per-ip", 256, "connections one client address may hold open; more are answered 429 and closed")
	fs.IntVar(&c.MaxConnsPerNet, "max-conns-per-network", 0, fmt.Sprintf("connections one client network (IPv4 /24, IPv6 /48) may hold open over all its addresses; more are answered 429 and closed (0: %d times --max-conns-per-ip)", clientkey.NetworkShare))
	fs.IntVar(&c.MaxRequestsPerIP, "max-requests-per-ip", 256, "requests one client address may have in flight over all its connections (an HTTP/2 connection carries up to 250), streams and WebSockets included while open; more are answered 429 with Retry-After (0: no cap)")
	fs.IntVar(&c.MaxRequestsPerNet, "max-requests-per-network", 0, fmt.Sprintf("requests one client network (IPv4 /24, IPv6 /48) may have in flight over all its addresses; more are answered 429 with Retry-After (0: %d times --max-requests-per-ip)", clientkey.NetworkShare))
	fs.IntVar(&c.MaxHeaders, "max-headers", 200, "header values stored per delivery; the rest are still forwarded, and counted in the delivery's droppedHeaders")
	fs.Var(&c.MaxHeaderBytes, "max-header-bytes", "largest request line and header block accepted (431 beyond), and most bytes of header names and values stored per delivery; at most 1MiB")
	fs.Var(&c.MaxAPIBody, "max-api-body", "largest GraphQL request body or GET query string (413 beyond)")
	fs.Var(&c.ProxyBodies, "proxy-body-budget", "memory all request bodies in flight may hold together (a proxied body until the local answer is back, the stored part of a recorded one, counted 4 times, until its record is committed; one client a quarter, one client network half, the bodies sent to one account's Endpoints a quarter; the last quarter only for those that hold at most a sixteenth; agents' answers past --max-ws-message while the relay holds them, under the agent's client and account as bodies are); beyond it senders get 503 with Retry-After, an agent's socket 1013")
	fs.Var(&c.MaxAPIAnswer, "max-api-answer", "largest GraphQL answer as encoded (one HTTP response or one WebSocket message); larger ones are refused with ANSWER_TOO_LARGE")
	fs.Var(&c.APIAnswers, "api-answer-budget", "heap all GraphQL answers being built or written at once may take, counted as 3 bytes a byte of answer (at least 3 times --max-api-answer); beyond it the fields are refused with UNAVAILABLE")
	fs.IntVar(&c.MaxQueryCost, "max-query-cost", graph.DefaultMaxCost, "cost budget of one GraphQL operation (see docs/security.md); costlier ones are refused before they run")
	fs.IntVar(&c.MaxQueryFields, "max-query-fields", graph.DefaultMaxFields, "most fields in one GraphQL operation, aliases and fragments expanded")
	fs.IntVar(&c.MaxQueryTokens, "max-query-tokens", graph.DefaultMaxTokens, "most tokens in one GraphQL document")
	fs.Var(duration.NewFlag(&c.KeepAlive, 5*time.Second), "keepalive", "WebSocket ping interval; a silent client is dropped after twice this")
	fs.Var(&c.MaxWSMessage, "max-ws-message", "largest WebSocket message a client may send (closed 1009 beyond); an authenticated socket may also send an agent's answer of --max-body")
	fs.IntVar(&c.MaxWSSubscriptions, "max-ws-subscriptions", 100, "operations one WebSocket may run at once (TOO_MANY_SUBSCRIPTIONS beyond)")
	fs.IntVar(&c.MaxWSPerIP, "max-ws-per-ip", 32, "open WebSockets per client IP (HTTP 429 beyond)")
	fs.IntVar(&c.MaxWSPerNet, "max-ws-per-network", 0, fmt.Sprintf("open WebSockets per client network (IPv4 /24, IPv6 /48) over all its addresses (HTTP 429 beyond; 0: %d times --max-ws-per-ip)", clientkey.NetworkShare))
	fs.IntVar(&c.MaxEndpointSessions, "max-endpoint-sessions", tunnel.DefaultMaxEndpointSessions,
		fmt.Sprintf("agent sessions one Endpoint may have open at once, across nodes (1 to %d); beyond: forwardRequests is TOO_MANY_SESSIONS", domain.MaxEndpointSessions))
	fs.IntVar(&c.MaxAccountSessions, "max-account-sessions", tunnel.DefaultMaxAccountSessions,
		"agent sessions one account may have open at once on each node; beyond: forwardRequests is TOO_MANY_SESSIONS")
	fs.Var(&c.MemoryLimit, "memory-limit", "soft limit of the Go heap: garbage is collected sooner as the relay nears it, or off; GOMEMLIMIT, when set, wins")
	fs.Var(duration.NewFlag(&c.ViewsWait, commands.DefaultViewsWait), "views-wait",
		"how long a mutation waits for the views to show its change before failing with UNAVAILABLE; views behind the log and still for longer make /readyz answer 503")
	fs.Var(&c.SignInRate, "signin-rate", "password sign-in attempts per login from addresses that never signed in to it (four times as many per client address, which also bounds sign-ups and joins), as N/UNIT,burst=B, or off (no limit; warned at start); beyond: RATE_LIMITED")
	fs.Var(&c.AnonymousRate, "anonymous-rate", "createInspector and signUp per client address (ten times as many per /24 or IPv6 /48), as N/UNIT,burst=B (UNIT s, min or h) or off; beyond: RATE_LIMITED")
	fs.Var(&c.AddressRate, "address-rate", "requests per public address, as N/UNIT,burst=B or off; beyond: 429 with Retry-After, not recorded, counted")
	fs.Var(duration.NewFlag(&c.RefusalInterval, 10*time.Second), "refusal-interval", "how often an address's rate-limit refusals are added to its history (one event per address)")
	fs.Var(&c.InspectorQuota, "inspector-quota", "log bytes a guest inspector's deliveries and own events (its answer) may take, or off; beyond: 429, not recorded")
	fs.Var(&c.GuestStorage, "guest-storage", "log bytes every guest inspector together may take (deliveries, answers), or off; the inspectors one client network (IPv4 /24, IPv6 /48) created hold at most a sixteenth; beyond: createInspector, /new and setInspectorAnswer refused QUOTA_EXCEEDED, deliveries to guests 507, not recorded; Endpoints go on")
	fs.Var(&c.SignupStorage, "signup-storage", "log bytes every account made by open sign-up may take together, as a size (64GiB), a percentage of the file system under --data (25%) or off; the accounts one client network (IPv4 /24, IPv6 /48) signed up hold at most a sixteenth; beyond: signUp from that network refused QUOTA_EXCEEDED, deliveries to those accounts' Endpoints 507, not recorded, their new settings and agent sessions QUOTA_EXCEEDED; accounts the operator made, invited or gave their own storage quota (relay accounts set-quota --storage) and guests go on")
	openDefault(fs, "signup-storage", defaultSignupStorage.String())
	c.signupStorageSet = func() bool { return fs.Changed("signup-storage") }
	fs.Var(&c.AccountStorage, "account-storage", "log bytes one account's streams may take together (its deliveries, settings, agent sessions, tokens), or off; beyond: 507, not recorded, new settings and agent sessions QUOTA_EXCEEDED (per account: relay accounts set-quota)")
	openDefault(fs, "account-storage", humanize.IBytes(uint64(defaultOpenAccountStorage)))
	fs.Var(&c.MinFreeDisk, "min-free-disk", "free disk the relay keeps under --data, as a size (1GiB), a percentage of the file system (5%) or off: below twice it sign-ups, new inspectors and Endpoints and inspectors' deliveries are refused, below it every delivery (507), retry and redrive; reads, deletions and retention go on")
	fs.Var(&c.AccountRate, "account-rate", "deliveries per account across all its Endpoints, per node, as N/UNIT,burst=B or off; beyond: 429 with Retry-After, not recorded (per account: relay accounts set-quota)")
	openDefault(fs, "account-rate", defaultOpenAccountRate.String())
	c.accountStorageSet = func() bool { return fs.Changed("account-storage") }
	c.accountRateSet = func() bool { return fs.Changed("account-rate") }
	fs.Var(&c.AccountAPICost, "account-api-cost", "GraphQL cost points (as --max-query-cost counts them) one account's operations may spend, per node, as N/UNIT,burst=B or off; beyond: RATE_LIMITED with retryAfterSeconds (per account: relay accounts set-quota --api-cost)")
	fs.IntVar(&c.AccountEndpoints, "account-endpoints", 1000, "Endpoints one account may have (deleted ones do not count), or 0 for no limit; beyond: createEndpoint is INVALID_INPUT. Also the rows the API's endpoints list is priced at and reads at most (1000 when 0: an account holding more pages it with first and after)")
	fs.Var(duration.NewFlag(&c.InspectorRetention, 7*24*time.Hour), "inspector-retention", "an expired inspector's deliveries are deleted from the log this long after it expired")
	fs.Var(duration.NewFlag(&c.Retention, defaultRetention), "retention", "how long an Endpoint keeps its deliveries unless it sets its own window (30d, 12h, ...); older ones are deleted from the log and the views")
	fs.Var(duration.NewFlag(&c.MaxRetention, defaultRetention), "max-retention", "longest window an Endpoint may set (default: --retention)")
	fs.Var(duration.NewFlag(&c.MinRetention, defaultMinRetention), "min-retention", "shortest window an Endpoint may set; the sweep runs every tenth of it (between 100ms and 10m)")
	c.maxRetentionSet = func() bool { return fs.Changed("max-retention") }
	fs.Var(duration.NewFlag(&c.CheckpointInterval, app.DefaultCheckpointInterval), "checkpoint-interval", "how often the relay signs the log's hash chain (the embedded log's, or every stream's head on JetStream) when it moved (0: never)")
	fs.StringVar(&c.CheckpointKey, "checkpoint-key", "", "Ed25519 key (PKCS #8 PEM) that signs the log's checkpoints; default DATA/checkpoint.key, created at first start")
	fs.StringVar(&c.SecretsKey, "secrets-key", "", "file of the 32-byte key that seals the handshake secrets addresses are given and the members' password hashes (raw bytes or 64 hex digits); default DATA/secrets.key, created at first start; every node of a cluster needs the same one")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM certificate (chain) for <domain> and *.<domain>: serve HTTPS on --listen; reloaded on SIGHUP and when the file changes")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.Var(duration.NewFlag(&c.TLSReloadInterval, 5*time.Second), "tls-reload-interval", "how often the certificate files are checked for a change")
	_ = fs.MarkHidden("tls-reload-interval")
	fs.Var(duration.NewFlag(&c.TLSHandshakeTimeout, 10*time.Second), "tls-handshake-timeout", "a connection's first byte and TLS handshake must arrive within this")
	fs.StringVar(&c.HTTPListen, "http-listen", "", "also serve plain HTTP here (with --tls-cert): addresses answer 503 wrong protocol, the console redirects to https")
	fs.StringVar(&c.PublicURL, "public-url", "", "scheme, domain and port of the public URLs, e.g. https://relay.example.com behind a TLS proxy (default: from --domain, --listen and --tls-cert)")
	fs.StringVar(&c.ConsoleURL, "console-url", "", "the console's own URL, on another registrable domain than --domain (https://console.example.com): the console and /graphql for browsers are served there, the bare domain keeps the API for tokens and sends browsers there; without a port it takes the public URLs' (docs/deploy.md)")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For/-Proto and Forwarded headers are believed, e.g. 127.0.0.1/32")
	c.domainSet = func() bool { return fs.Changed("domain") }
	fs.StringVar(&c.Bus, "bus", "", "NATS servers of the bus between relay nodes sharing one --eventstore (nats://host:4222, comma-separated cluster seeds); empty: a single node")
	fs.StringVar(&c.NodeID, "node-id", "", "this node's name in a cluster (letters, digits, - and _); empty: one generated and kept in --data")
	fs.Var(duration.NewFlag(&c.NodeLease, cluster.DefaultLease), "node-lease", "a node unheard on the bus for this long is taken for gone: its forwards answer 503 and its agent sessions are closed")
}

// openDefault says in --help that flag name's default depends on --signup.
func openDefault(fs *pflag.FlagSet, name, open string) {
	fs.Lookup(name).DefValue = open + " with --signup open, else off"
}

// settleAccountQuotas gives --account-storage, --account-rate and
// --signup-storage their defaults, which depend on --signup: the open relay's when anyone may
// sign up, off otherwise. A value given (flag or RELAY_*) always wins.
func (c *serveConfig) settleAccountQuotas() {
	if domain.SignupMode(c.Signup) != domain.SignupOpen {
		return
	}
	if c.signupStorageSet == nil || !c.signupStorageSet() {
		c.SignupStorage = diskLimit(defaultSignupStorage)
	}
	if c.accountStorageSet == nil || !c.accountStorageSet() {
		c.AccountStorage = sizeOrOff{byteSize(c.openQuotas.Storage)}
	}
	if c.accountRateSet == nil || !c.accountRateSet() {
		c.AccountRate = c.openQuotas.Rate
	}
}

// Endpoint retention defaults: a month, as the longer plans of hosted
// webhook services keep; windows from an hour up.
const (
	defaultRetention    = 30 * 24 * time.Hour
	defaultMinRetention = time.Hour
)

// retentionLimits are the Endpoints' windows as the flags give them:
// --max-retention defaults to --retention.
func (c *serveConfig) retentionLimits() domain.RetentionLimits {
	longest := time.Duration(c.MaxRetention)
	if c.maxRetentionSet == nil || !c.maxRetentionSet() {
		longest = time.Duration(c.Retention)
	}
	return domain.RetentionLimits{Default: time.Duration(c.Retention), Min: time.Duration(c.MinRetention), Max: longest}
}

// endpointRetentionSweep is how often Endpoints' old deliveries are looked
// for: a tenth of the shortest window, between 100ms and 10m.
func (c *serveConfig) endpointRetentionSweep() time.Duration {
	return min(max(time.Duration(c.MinRetention)/10, 100*time.Millisecond), 10*time.Minute)
}

// retentionSweep is how often expired inspectors are looked for: a tenth of
// the retention, between 100ms and 10m, so deliveries outlive their
// retention by at most that much.
func (c *serveConfig) retentionSweep() time.Duration {
	return min(max(c.InspectorRetention/10, 100*time.Millisecond), 10*time.Minute)
}

// busServers are the NATS URLs of --bus (checked by validate).
func (c *serveConfig) busServers() []string {
	if c.Bus == "" {
		return nil
	}
	servers, _ := cluster.ParseServers(c.Bus)
	return servers
}

// DefaultGuestStorage is --guest-storage's default: 256 inspectors at the
// default --inspector-quota, 1 GiB (16 of them) per client network.
const DefaultGuestStorage = 16 << 30

// defaultSignupStorage is --signup-storage's default with --signup open: a
// quarter of the file system under --data (a sixteenth of that per client
// network: on a 256 GiB disk 64 GiB, 4 GiB per network), so that sign-ups
// can never bring the disk to its reserve, whatever its size, while the
// operator's and invited accounts, guests and retention keep the rest.
var defaultSignupStorage = diskreserve.Limit{Percent: 25}

// resolveSignupStorage reads --signup-storage in bytes: a percentage is
// of the file system under --data, read once at start.
func (c *serveConfig) resolveSignupStorage() error {
	l := diskreserve.Limit(c.SignupStorage)
	if l.Percent <= 0 {
		c.signupStorageBytes = int64(l.Bytes)
		return nil
	}
	sp, err := diskreserve.Statfs{Dir: c.Data}.Space()
	if err != nil {
		return fmt.Errorf("--signup-storage %s: the size of the file system under --data: %w (give a size instead)", l, err)
	}
	c.signupStorageBytes = int64(l.Of(sp.Total))
	return nil
}

// appConfig is what the relay is built from, given the data folder's lock
// and the public URLs.
func (c *serveConfig) appConfig(lock *datalock.Lock, urls publicURLs, log *slog.Logger) app.Config {
	return app.Config{
		Data: c.Data, EventStore: c.EventStore, Logger: log, Lock: lock, Lenient: true,
		PublicURL: urls.address, AdminToken: c.AdminToken, AnonymousRate: c.AnonymousRate,
		SignInRate: c.SignInRate, NoSignInLimit: c.SignInRate.Off(), ConsoleURL: urls.consoleSite,
		Commands: commands.Config{InspectorTTL: c.InspectorTTL, ForwardTimeout: c.ForwardTimeout, Signup: domain.SignupMode(c.Signup), ViewsWait: c.ViewsWait,
			Retention:     c.retentionLimits(),
			GuestStorage:  domain.GuestStorage{Total: int64(c.GuestStorage.byteSize)},
			SignupStorage: domain.SignupStorage{Total: c.signupStorageBytes},
			Quotas:        commands.QuotaDefaults{Storage: int64(c.AccountStorage.byteSize), Rate: c.AccountRate, APICost: c.AccountAPICost}, MaxEndpoints: c.AccountEndpoints},
		Sessions: tunnel.SessionCaps{PerEndpoint: c.MaxEndpointSessions, PerAccount: c.MaxAccountSessions},
		API: graph.ServerOptions{
			KeepAlive: c.KeepAlive, MaxWSMessage: int64(c.MaxWSMessage), MaxAgentAnswer: int64(c.MaxBody),
			MaxWSSubscriptions: c.MaxWSSubscriptions, MaxWSPerIP: c.MaxWSPerIP, MaxWSPerNetwork: c.MaxWSPerNet,
			Limits: graph.Limits{
				MaxBody: int64(c.MaxAPIBody), MaxCost: c.MaxQueryCost, MaxFields: c.MaxQueryFields,
				MaxTokens: c.MaxQueryTokens, CaptureCap: int64(c.CaptureCap),
				MaxAnswer: int64(c.MaxAPIAnswer), AnswerBudget: int64(c.APIAnswers),
				Endpoints: c.AccountEndpoints,
			},
		},
		Ingress: ingress.Config{
			Domain: c.Domain, CaptureCap: int64(c.CaptureCap), MaxBody: int64(c.MaxBody), ProxyBodyBudget: int64(c.ProxyBodies),
			ForwardTimeout: c.ForwardTimeout, MaxQueueBacklog: c.QueueBacklog, MaxHeaders: c.MaxHeaders, MaxHeaderBytes: int64(c.MaxHeaderBytes),
			AddressRate: c.AddressRate, RefusalInterval: c.RefusalInterval, InspectorQuota: int64(c.InspectorQuota.byteSize),
			RequireHTTPS: urls.scheme == "https", PublicURL: urls.address, ConsoleURL: urls.bare(),
		},
		BodyTimeout:    c.BodyTimeout,
		RetentionSweep: c.retentionSweep(), InspectorRetention: c.InspectorRetention,
		EndpointRetentionSweep: c.endpointRetentionSweep(),
		CheckpointInterval:     c.CheckpointInterval, CheckpointKey: c.CheckpointKey, SecretsKey: c.SecretsKey,
		Bus: c.busServers(), Node: c.NodeID, NodeLease: c.NodeLease,
		MinFreeDisk: diskreserve.Limit(c.MinFreeDisk),
	}
}

// diskLimit is --min-free-disk: a size, a percentage or off.
type diskLimit diskreserve.Limit

func (d *diskLimit) String() string { return diskreserve.Limit(*d).String() }
func (d *diskLimit) Type() string   { return "size|percent" }
func (d *diskLimit) Set(s string) error {
	l, err := diskreserve.ParseLimit(s)
	if err != nil {
		return err
	}
	*d = diskLimit(l)
	return nil
}

// signupFlag is --signup: open, invite or closed, or the boolean it was.
type signupFlag domain.SignupMode

func (f *signupFlag) String() string { return string(*f) }
func (f *signupFlag) Type() string   { return "mode" }
func (f *signupFlag) Set(s string) error {
	m, err := domain.ParseSignupMode(s)
	if err != nil {
		return errors.New("must be open, invite or closed (true and false mean open and closed)")
	}
	*f = signupFlag(m)
	return nil
}
