package serve

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/relayhq/relay/cli/cmdutil"
	"github.com/relayhq/relay/internal/diskreserve"
)

// TestServeConfig parses serve's flags and environment the way the serve
// command does: flags, then RELAY_* for flags left unset, then validate.
func TestServeConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // substring; empty: valid
		check   func(c serveConfig) bool
	}{
		{name: "defaults", check: func(c serveConfig) bool {
			return c.Listen == "127.0.0.1:8080" && c.Domain == "localhost" && c.CaptureCap == 256<<10 && c.MaxBody == 10<<20 &&
				c.InspectorTTL == 24*time.Hour && c.ForwardTimeout == 30*time.Second && c.Signup == "open"
		}},
		{name: "signup modes", args: []string{"--signup", "invite"}, check: func(c serveConfig) bool { return c.Signup == "invite" }},
		{name: "signup true", args: []string{"--signup=true"}, check: func(c serveConfig) bool { return c.Signup == "open" }},
		{name: "signup closed from env", env: map[string]string{"RELAY_SIGNUP": "closed"}, check: func(c serveConfig) bool { return c.Signup == "closed" }},
		{name: "signup nonsense", args: []string{"--signup", "maybe"}, wantErr: "open, invite or closed"},
		{name: "env fills an unset flag", env: map[string]string{"RELAY_INSPECTOR_TTL": "1h", "RELAY_SIGNUP": "false"},
			check: func(c serveConfig) bool { return c.InspectorTTL == time.Hour && c.Signup == "closed" }},
		{name: "flag beats env", args: []string{"--inspector-ttl", "2h"}, env: map[string]string{"RELAY_INSPECTOR_TTL": "1h"},
			check: func(c serveConfig) bool { return c.InspectorTTL == 2*time.Hour }},
		{name: "dashes become underscores", env: map[string]string{"RELAY_FORWARD_TIMEOUT": "5s", "RELAY_ADMIN_TOKEN": "secret"},
			check: func(c serveConfig) bool { return c.ForwardTimeout == 5*time.Second && c.AdminToken == "secret" }},
		{name: "binary size", args: []string{"--capture-cap", "64KiB"},
			check: func(c serveConfig) bool { return c.CaptureCap == 64<<10 }},
		{name: "decimal size from env", env: map[string]string{"RELAY_MAX_BODY": "12MB"},
			check: func(c serveConfig) bool { return c.MaxBody == 12_000_000 }},
		{name: "max body over the log's bound", args: []string{"--max-body", "17MiB"}, wantErr: "--max-body"},
		{name: "header bytes over the log's bound", args: []string{"--max-header-bytes", "2MiB"}, wantErr: "--max-header-bytes"},
		{name: "size that is no size", args: []string{"--max-body", "lots"}, wantErr: "not a size"},
		{name: "zero size", env: map[string]string{"RELAY_CAPTURE_CAP": "0"}, wantErr: "RELAY_CAPTURE_CAP"},
		{name: "size too large", args: []string{"--max-body", "2TiB"}, wantErr: "out of range"},
		{name: "bad duration in env", env: map[string]string{"RELAY_KEEPALIVE": "soon"}, wantErr: "RELAY_KEEPALIVE"},
		{name: "capture cap above max body", args: []string{"--capture-cap", "2MiB", "--max-body", "1MiB"}, wantErr: "--capture-cap"},
		// The budget counts the heap of answers, 3 bytes a byte: under three
		// times the largest answer, that answer could never be built.
		{name: "answer budget under the heap of the largest answer", args: []string{"--max-api-answer", "32MiB", "--api-answer-budget", "64MiB"}, wantErr: "3 times --max-api-answer"},
		{name: "answer budget at the heap of the largest answer", args: []string{"--max-api-answer", "32MiB", "--api-answer-budget", "96MiB"}},
		{name: "non-positive inspector ttl", env: map[string]string{"RELAY_INSPECTOR_TTL": "0s"}, wantErr: "--inspector-ttl"},
		{name: "non-positive forward timeout", args: []string{"--forward-timeout", "-1s"}, wantErr: "--forward-timeout"},
		{name: "no queue backlog", args: []string{"--queue-backlog", "0"}, wantErr: "--queue-backlog"},
		{name: "queue backlog past its bound", env: map[string]string{"RELAY_QUEUE_BACKLOG": "10000001"}, wantErr: "--queue-backlog"},
		{name: "websocket bounds", args: []string{"--max-ws-message", "64KiB", "--max-ws-subscriptions", "5"}, env: map[string]string{"RELAY_MAX_WS_PER_IP": "2"},
			check: func(c serveConfig) bool {
				return c.MaxWSMessage == 64<<10 && c.MaxWSSubscriptions == 5 && c.MaxWSPerIP == 2
			}},
		{name: "websocket defaults", check: func(c serveConfig) bool {
			return c.MaxWSMessage == 1<<20 && c.MaxWSSubscriptions == 100 && c.MaxWSPerIP == 32
		}},
		{name: "no subscriptions", args: []string{"--max-ws-subscriptions", "0"}, wantErr: "--max-ws-subscriptions"},
		{name: "no sockets per ip", env: map[string]string{"RELAY_MAX_WS_PER_IP": "0"}, wantErr: "--max-ws-per-ip"},
		{name: "sockets per network default", check: func(c serveConfig) bool {
			return c.MaxWSPerNet == 0 && c.appConfig(nil, publicURLs{}, nil).API.MaxWSPerNetwork == 0
		}},
		{name: "sockets per network from env", env: map[string]string{"RELAY_MAX_WS_PER_NETWORK": "64"},
			check: func(c serveConfig) bool { return c.appConfig(nil, publicURLs{}, nil).API.MaxWSPerNetwork == 64 }},
		{name: "sockets per network below per ip", args: []string{"--max-ws-per-ip", "8", "--max-ws-per-network", "4"},
			wantErr: "--max-ws-per-network"},
		{name: "session caps", args: []string{"--max-endpoint-sessions", "8"}, env: map[string]string{"RELAY_MAX_ACCOUNT_SESSIONS": "20"},
			check: func(c serveConfig) bool {
				caps := c.appConfig(nil, publicURLs{}, nil).Sessions
				return caps.PerEndpoint == 8 && caps.PerAccount == 20
			}},
		{name: "session cap defaults", check: func(c serveConfig) bool { return c.MaxEndpointSessions == 64 && c.MaxAccountSessions == 256 }},
		{name: "endpoint sessions past a snapshot's", args: []string{"--max-endpoint-sessions", "257"}, wantErr: "--max-endpoint-sessions"},
		{name: "no account sessions", args: []string{"--max-account-sessions", "0"}, wantErr: "--max-account-sessions"},
		{name: "non-positive keepalive", args: []string{"--keepalive", "0s"}, wantErr: "--keepalive"},
		{name: "empty domain", args: []string{"--domain", ""}, wantErr: "--domain"},
		{name: "console on its own site", args: []string{"--domain", "relay.example.net", "--console-url", "https://console.example.com"},
			check: func(c serveConfig) bool { return c.console != nil && c.console.Hostname() == "console.example.com" }},
		{name: "console url from env", args: []string{"--domain", "relay.example.net"}, env: map[string]string{"RELAY_CONSOLE_URL": "https://console.example.com"},
			check: func(c serveConfig) bool { return c.console != nil }},
		{name: "console on the bare domain", args: []string{"--domain", "relay.example.com", "--console-url", "https://relay.example.com"}, wantErr: "shares a site"},
		{name: "console on an address", args: []string{"--domain", "relay.example.com", "--console-url", "https://console.relay.example.com"}, wantErr: "shares a site"},
		{name: "console beside the domain", args: []string{"--domain", "relay.example.com", "--console-url", "https://console.example.com"}, wantErr: "shares a site"},
		{name: "console on a public suffix's sibling", args: []string{"--domain", "relay.github.io", "--console-url", "https://console.github.io"},
			check: func(c serveConfig) bool { return c.console != nil }},
		{name: "console url with a path", args: []string{"--console-url", "https://console.example.com/app"}, wantErr: "only a scheme"},
		{name: "console url scheme", args: []string{"--console-url", "ftp://console.example.com"}, wantErr: "https or http"},
		{name: "signin rate off is off", args: []string{"--signin-rate", "off"}, check: func(c serveConfig) bool {
			return c.SignInRate.Off() && c.appConfig(nil, publicURLs{}, nil).NoSignInLimit
		}},
		{name: "signin rate default is on", check: func(c serveConfig) bool {
			return !c.SignInRate.Off() && !c.appConfig(nil, publicURLs{}, nil).NoSignInLimit
		}},
		{name: "memory limit default", check: func(c serveConfig) bool { return c.MemoryLimit.byteSize == 160<<20 }},
		{name: "memory limit off from env", env: map[string]string{"RELAY_MEMORY_LIMIT": "off"},
			check: func(c serveConfig) bool { return c.MemoryLimit.byteSize == 0 }},
		{name: "connection limits default", check: func(c serveConfig) bool {
			return c.IdleTimeout == time.Minute && c.BodyTimeout == 30*time.Second && c.MaxConnsPerIP == 256 &&
				c.MaxRequestsPerIP == 256 && c.MaxHeaders == 200 && c.MaxHeaderBytes == 64<<10
		}},
		{name: "connection limits from env", env: map[string]string{"RELAY_IDLE_TIMEOUT": "2s", "RELAY_BODY_TIMEOUT": "3s",
			"RELAY_MAX_CONNS_PER_IP": "8", "RELAY_MAX_REQUESTS_PER_IP": "12", "RELAY_MAX_HEADERS": "10", "RELAY_MAX_HEADER_BYTES": "8KiB"},
			check: func(c serveConfig) bool {
				return c.IdleTimeout == 2*time.Second && c.BodyTimeout == 3*time.Second && c.MaxConnsPerIP == 8 &&
					c.MaxRequestsPerIP == 12 && c.MaxHeaders == 10 && c.MaxHeaderBytes == 8<<10
			}},
		{name: "non-positive idle timeout", args: []string{"--idle-timeout", "0s"}, wantErr: "--idle-timeout"},
		{name: "non-positive body timeout", env: map[string]string{"RELAY_BODY_TIMEOUT": "-1s"}, wantErr: "--body-timeout"},
		{name: "no connections per ip", args: []string{"--max-conns-per-ip", "0"}, wantErr: "--max-conns-per-ip"},
		{name: "connections per network default", check: func(c serveConfig) bool { return c.MaxConnsPerNet == 0 }},
		{name: "connections per network from env", env: map[string]string{"RELAY_MAX_CONNS_PER_NETWORK": "2048"},
			check: func(c serveConfig) bool { return c.MaxConnsPerNet == 2048 }},
		{name: "connections per network below per ip", args: []string{"--max-conns-per-ip", "8", "--max-conns-per-network", "4"},
			wantErr: "--max-conns-per-network"},
		{name: "negative requests per ip", args: []string{"--max-requests-per-ip", "-1"}, wantErr: "--max-requests-per-ip"},
		{name: "requests per network default", check: func(c serveConfig) bool { return c.MaxRequestsPerNet == 0 }},
		{name: "requests per network from env", env: map[string]string{"RELAY_MAX_REQUESTS_PER_NETWORK": "2048"},
			check: func(c serveConfig) bool { return c.MaxRequestsPerNet == 2048 }},
		{name: "requests per network below per ip", args: []string{"--max-requests-per-ip", "8", "--max-requests-per-network", "4"},
			wantErr: "--max-requests-per-network"},
		{name: "requests per network without a cap per ip", args: []string{"--max-requests-per-ip", "0", "--max-requests-per-network", "512"},
			wantErr: "--max-requests-per-network"},
		{name: "no headers", args: []string{"--max-headers", "0"}, wantErr: "--max-headers"},
		{name: "header bytes too small", args: []string{"--max-header-bytes", "100B"}, wantErr: "--max-header-bytes"},
		{name: "api limits default", check: func(c serveConfig) bool {
			return c.MaxAPIBody == 1<<20 && c.MaxQueryCost == 10_000 && c.MaxQueryFields == 500 && c.MaxQueryTokens == 1000
		}},
		{name: "api limits from env", env: map[string]string{"RELAY_MAX_API_BODY": "64KiB", "RELAY_MAX_QUERY_COST": "5000",
			"RELAY_MAX_QUERY_FIELDS": "200", "RELAY_MAX_QUERY_TOKENS": "500"},
			check: func(c serveConfig) bool {
				return c.MaxAPIBody == 64<<10 && c.MaxQueryCost == 5000 && c.MaxQueryFields == 200 && c.MaxQueryTokens == 500
			}},
		{name: "api body too small", args: []string{"--max-api-body", "100B"}, wantErr: "--max-api-body"},
		{name: "query cost too small", args: []string{"--max-query-cost", "10"}, wantErr: "--max-query-cost"},
		{name: "query fields too small", env: map[string]string{"RELAY_MAX_QUERY_FIELDS": "0"}, wantErr: "--max-query-fields"},
		{name: "query tokens too small", args: []string{"--max-query-tokens", "-1"}, wantErr: "--max-query-tokens"},
		{name: "limit defaults", check: func(c serveConfig) bool {
			return c.AnonymousRate.String() == "30/h,burst=10" && c.AddressRate.String() == "50/s,burst=100" &&
				c.InspectorQuota.byteSize == 64<<20 && c.InspectorRetention == 7*24*time.Hour && c.RefusalInterval == 10*time.Second
		}},
		{name: "rates from env", env: map[string]string{"RELAY_ANONYMOUS_RATE": "10/min,burst=3", "RELAY_ADDRESS_RATE": "off"},
			check: func(c serveConfig) bool {
				return c.AnonymousRate.N == 10 && c.AnonymousRate.Per == time.Minute && c.AnonymousRate.Burst == 3 && c.AddressRate.Off()
			}},
		{name: "bad rate", args: []string{"--address-rate", "fast"}, wantErr: "N/UNIT"},
		{name: "bad rate in env", env: map[string]string{"RELAY_ANONYMOUS_RATE": "5/week"}, wantErr: "RELAY_ANONYMOUS_RATE"},
		{name: "open sign-up limits accounts", check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 1<<30 && q.Rate.String() == "100/s,burst=1000"
		}},
		{name: "invite leaves accounts unlimited", args: []string{"--signup", "invite"}, check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 0 && q.Rate.Off()
		}},
		{name: "closed from env leaves accounts unlimited", env: map[string]string{"RELAY_SIGNUP": "closed"}, check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 0 && q.Rate.Off()
		}},
		{name: "off wins over open sign-up's defaults", args: []string{"--account-storage", "off", "--account-rate", "off"}, check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 0 && q.Rate.Off()
		}},
		{name: "off from env wins too", env: map[string]string{"RELAY_ACCOUNT_STORAGE": "off", "RELAY_ACCOUNT_RATE": "off"}, check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 0 && q.Rate.Off()
		}},
		{name: "one quota given, the other open sign-up's", args: []string{"--account-rate", "10/s"}, check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 1<<30 && q.Rate.String() == "10/s,burst=10"
		}},
		{name: "quota given with invite", args: []string{"--signup", "invite", "--account-storage", "5GiB"}, check: func(c serveConfig) bool {
			q := c.appConfig(nil, publicURLs{}, nil).Commands.Quotas
			return q.Storage == 5<<30 && q.Rate.Off()
		}},
		{name: "quota off", args: []string{"--inspector-quota", "off"}, check: func(c serveConfig) bool { return c.InspectorQuota.byteSize == 0 }},
		{name: "guest storage default", check: func(c serveConfig) bool { return c.GuestStorage.byteSize == DefaultGuestStorage }},
		{name: "guest storage set", args: []string{"--guest-storage", "64GiB"}, check: func(c serveConfig) bool { return c.GuestStorage.byteSize == 64<<30 }},
		{name: "guest storage off", args: []string{"--guest-storage", "off"}, check: func(c serveConfig) bool { return c.GuestStorage.byteSize == 0 }},
		{name: "sign-up storage default with open sign-up, a quarter of the disk under --data", args: []string{"--data", "."}, check: func(c serveConfig) bool {
			if c.SignupStorage != (diskLimit{Percent: 25}) || c.resolveSignupStorage() != nil {
				return false
			}
			sp, err := diskreserve.Statfs{Dir: "."}.Space()
			return err == nil && c.signupStorageBytes == int64(sp.Total/4) &&
				c.appConfig(nil, publicURLs{}, nil).Commands.SignupStorage.Total == c.signupStorageBytes
		}},
		{name: "sign-up storage off with invite", args: []string{"--signup", "invite"}, check: func(c serveConfig) bool {
			return diskreserve.Limit(c.SignupStorage).Off() && c.resolveSignupStorage() == nil &&
				c.appConfig(nil, publicURLs{}, nil).Commands.SignupStorage.Total == 0
		}},
		{name: "sign-up storage as a size from env", env: map[string]string{"RELAY_SIGNUP_STORAGE": "64GiB"}, check: func(c serveConfig) bool {
			return c.resolveSignupStorage() == nil && c.appConfig(nil, publicURLs{}, nil).Commands.SignupStorage.Total == 64<<30
		}},
		{name: "sign-up storage off wins over open sign-up's default", args: []string{"--signup-storage", "off"}, check: func(c serveConfig) bool {
			return diskreserve.Limit(c.SignupStorage).Off()
		}},
		{name: "sign-up storage over half the disk", args: []string{"--signup-storage", "60%"}, wantErr: "at most 50"},
		{name: "quota from env", env: map[string]string{"RELAY_INSPECTOR_QUOTA": "1MiB"}, check: func(c serveConfig) bool { return c.InspectorQuota.byteSize == 1<<20 }},
		{name: "zero quota", args: []string{"--inspector-quota", "0"}, wantErr: "out of range"},
		{name: "disk reserve default", check: func(c serveConfig) bool { return c.MinFreeDisk == diskLimit{Bytes: 1 << 30} }},
		{name: "disk reserve as a percentage from env", env: map[string]string{"RELAY_MIN_FREE_DISK": "5%"},
			check: func(c serveConfig) bool { return c.MinFreeDisk == diskLimit{Percent: 5} }},
		{name: "disk reserve off", args: []string{"--min-free-disk", "off"}, check: func(c serveConfig) bool { return diskreserve.Limit(c.MinFreeDisk).Off() }},
		{name: "disk reserve over half the disk", args: []string{"--min-free-disk", "60%"}, wantErr: "at most 50"},
		{name: "disk reserve not a size", args: []string{"--min-free-disk", "lots"}, wantErr: "--min-free-disk"},
		{name: "non-positive retention", env: map[string]string{"RELAY_INSPECTOR_RETENTION": "0s"}, wantErr: "--inspector-retention"},
		{name: "endpoint retention defaults", check: func(c serveConfig) bool {
			l := c.retentionLimits()
			return l.Default == 30*24*time.Hour && l.Max == l.Default && l.Min == time.Hour && c.endpointRetentionSweep() == 6*time.Minute
		}},
		{name: "retention in days from env, the maximum follows", env: map[string]string{"RELAY_RETENTION": "7d"}, check: func(c serveConfig) bool {
			l := c.retentionLimits()
			return l.Default == 7*24*time.Hour && l.Max == l.Default
		}},
		{name: "retention and a larger maximum", args: []string{"--retention", "7d", "--max-retention", "90d"}, env: map[string]string{"RELAY_MIN_RETENTION": "1s"},
			check: func(c serveConfig) bool {
				l := c.retentionLimits()
				return l.Max == 90*24*time.Hour && l.Min == time.Second && c.endpointRetentionSweep() == 100*time.Millisecond
			}},
		{name: "maximum below the default", args: []string{"--retention", "30d", "--max-retention", "7d"}, wantErr: "--max-retention (7d) must be at least --retention (30d)"},
		{name: "default below the minimum", args: []string{"--retention", "30m"}, wantErr: "--retention (30m) must be at least --min-retention (1h)"},
		{name: "zero retention", args: []string{"--retention", "0d"}, wantErr: "must be positive"},
		{name: "malformed retention", env: map[string]string{"RELAY_RETENTION": "a month"}, wantErr: "RELAY_RETENTION"},
		{name: "non-positive refusal interval", args: []string{"--refusal-interval", "0s"}, wantErr: "--refusal-interval"},
		{name: "nats cluster seeds", env: map[string]string{"RELAY_EVENTSTORE": "nats://a:4222,nats://b:4222?replicas=3"},
			check: func(c serveConfig) bool { return c.EventStore == "nats://a:4222,nats://b:4222?replicas=3" }},
		{name: "bad nats URL", args: []string{"--eventstore", "nats://user:hunter2@a:4222,http://b"}, wantErr: "--eventstore: nats URL 2 of 2"},
		{name: "tls and proxy defaults", check: func(c serveConfig) bool {
			return c.TLSCert == "" && c.HTTPListen == "" && c.PublicURL == "" && len(c.trusted) == 0 &&
				c.TLSHandshakeTimeout == 10*time.Second && c.TLSReloadInterval == 5*time.Second
		}},
		{name: "tls from env", env: map[string]string{"RELAY_TLS_CERT": "c.pem", "RELAY_TLS_KEY": "k.pem", "RELAY_HTTP_LISTEN": ":80"},
			check: func(c serveConfig) bool { return c.TLSCert == "c.pem" && c.TLSKey == "k.pem" && c.HTTPListen == ":80" }},
		{name: "cert without key", args: []string{"--tls-cert", "c.pem"}, wantErr: "--tls-key go together"},
		{name: "http-listen without tls", env: map[string]string{"RELAY_HTTP_LISTEN": ":80"}, wantErr: "--http-listen"},
		{name: "public url sets the domain", env: map[string]string{"RELAY_PUBLIC_URL": "https://Relay.Example.com:8443"},
			check: func(c serveConfig) bool { return c.Domain == "relay.example.com" && c.publicURL.Port() == "8443" }},
		{name: "public url names --domain", args: []string{"--domain", "relay.example.com", "--public-url", "https://relay.example.com/"},
			check: func(c serveConfig) bool { return c.Domain == "relay.example.com" }},
		{name: "public url host is not --domain", args: []string{"--domain", "a.example", "--public-url", "https://b.example"}, wantErr: "is not --domain"},
		{name: "public url scheme", args: []string{"--public-url", "ftp://relay.example.com"}, wantErr: "https or http"},
		{name: "public url with a path", args: []string{"--public-url", "https://relay.example.com/relay"}, wantErr: "only a scheme"},
		{name: "public url bad port", args: []string{"--public-url", "https://relay.example.com:0"}, wantErr: "bad port"},
		{name: "public url and public port", args: []string{"--public-url", "https://relay.example.com", "--public-port", "443"}, wantErr: "--public-port"},
		{name: "http public url with tls", args: []string{"--public-url", "http://localhost", "--tls-cert", "c", "--tls-key", "k"}, wantErr: "are https"},
		{name: "trusted proxies", env: map[string]string{"RELAY_TRUSTED_PROXIES": "127.0.0.1/32, 10.0.0.0/8,::1"},
			check: func(c serveConfig) bool { return len(c.trusted) == 3 && c.trusted.ContainsHost("10.2.3.4") }},
		{name: "bad trusted proxy", args: []string{"--trusted-proxies", "10.0.0.0/8,caddy"}, wantErr: "--trusted-proxies"},
		{name: "non-positive handshake timeout", args: []string{"--tls-handshake-timeout", "0s"}, wantErr: "--tls-handshake-timeout"},
		{name: "unknown nats option", args: []string{"--eventstore", "nats://a:4222?replica=3"}, wantErr: "unknown option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c serveConfig
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.flags(fs)
			err := fs.Parse(tt.args)
			if err == nil {
				err = cmdutil.BindEnv(fs, func(k string) string { return tt.env[k] })
			}
			if err == nil {
				err = c.validate()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
			case tt.check != nil && !tt.check(c):
				t.Fatalf("config = %+v", c)
			}
		})
	}
}

func TestPublicURLs(t *testing.T) {
	tests := []struct {
		cfg        serveConfig
		listenPort int
		tls        bool
		bare, addr string
	}{
		{serveConfig{Domain: "localhost"}, 8080, false, "http://localhost:8080", "http://ab1.localhost:8080/"},
		{serveConfig{Domain: "localhost"}, 8443, true, "https://localhost:8443", "https://ab1.localhost:8443/"},
		{serveConfig{Domain: "relay.example.com"}, 443, true, "https://relay.example.com", "https://ab1.relay.example.com/"},
		{serveConfig{Domain: "localhost", PublicPort: 80}, 8080, false, "http://localhost", "http://ab1.localhost/"},
		{serveConfig{Domain: "relay.example.com", PublicURL: "https://relay.example.com"}, 8080, false, "https://relay.example.com", "https://ab1.relay.example.com/"},
		{serveConfig{Domain: "relay.example.com", PublicURL: "https://relay.example.com:8443"}, 8080, false, "https://relay.example.com:8443", "https://ab1.relay.example.com:8443/"},
	}
	for _, tt := range tests {
		c := tt.cfg
		c.TLSReloadInterval, c.TLSHandshakeTimeout = time.Second, time.Second
		if err := c.validateDeployment(); err != nil {
			t.Fatal(err)
		}
		u := c.publicURLs(tt.listenPort, tt.tls)
		if u.bare() != tt.bare || u.address("ab1") != tt.addr {
			t.Errorf("%+v on %d (tls %v): %s and %s, want %s and %s", tt.cfg, tt.listenPort, tt.tls, u.bare(), u.address("ab1"), tt.bare, tt.addr)
		}
	}
}

// TestConsoleURLs: the console's URL takes the public URLs' port unless it
// names one, and is the bare domain's without --console-url; the warning
// about a shared site is given exactly when the console shares the
// addresses' site over plain HTTP on a name others reach.
func TestConsoleURLs(t *testing.T) {
	tests := []struct {
		cfg        serveConfig
		listenPort int
		tls        bool
		console    string
		warn       bool
	}{
		{serveConfig{Domain: "localhost"}, 8080, false, "http://localhost:8080", false},
		{serveConfig{Domain: "relay.test", ConsoleURL: "http://console.test"}, 8080, false, "http://console.test:8080", false},
		{serveConfig{Domain: "relay.example.net", ConsoleURL: "https://console.example.com"}, 443, true, "https://console.example.com", false},
		{serveConfig{Domain: "relay.example.net", ConsoleURL: "https://console.example.com:9443"}, 443, true, "https://console.example.com:9443", false},
		{serveConfig{Domain: "relay.example.net", PublicURL: "https://relay.example.net", ConsoleURL: "https://console.example.com"}, 8080, false, "https://console.example.com", false},
		{serveConfig{Domain: "relay.example.net"}, 80, false, "http://relay.example.net", true},
		{serveConfig{Domain: "relay.example.net"}, 443, true, "https://relay.example.net", false},
		{serveConfig{Domain: "127.0.0.1"}, 8080, false, "http://127.0.0.1:8080", false},
		{serveConfig{Domain: "relay.example.net", ConsoleURL: "http://console.example.com"}, 80, false, "http://console.example.com", false},
	}
	for _, tt := range tests {
		c := tt.cfg
		c.TLSReloadInterval, c.TLSHandshakeTimeout = time.Second, time.Second
		if err := c.validateDeployment(); err != nil {
			t.Fatal(err)
		}
		if err := c.validateConsole(); err != nil {
			t.Fatal(err)
		}
		u := c.publicURLs(tt.listenPort, tt.tls)
		if u.console() != tt.console || c.sharedSiteRisk(u) != tt.warn {
			t.Errorf("%+v on %d (tls %v): console %s, warn %v; want %s, %v", tt.cfg, tt.listenPort, tt.tls, u.console(), c.sharedSiteRisk(u), tt.console, tt.warn)
		}
	}
}
