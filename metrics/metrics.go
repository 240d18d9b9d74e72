package metrics

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/relayhq/relay/internal/diskreserve"
)

// Metrics holds the registry and the instruments.
type Metrics struct {
	reg             *prometheus.Registry
	requests        *prometheus.CounterVec
	duration        *prometheus.HistogramVec
	inFlight        *prometheus.GaugeVec
	refused         prometheus.Counter
	refusedRequests prometheus.Counter

	// The series of each area and code, found once: WithLabelValues hashes
	// its labels on every call, and a status code's label is a new string.
	areas   cache[string, prometheus.Gauge]
	answers cache[answerKey, answerSeries]
}

type answerKey struct {
	area string
	code int
}

// answerSeries are the series one answer counts in: its count, and its
// latency (nil for 101: see Instrument).
type answerSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// New registers the relay's instruments and the Go runtime's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_http_requests_total",
			Help: "HTTP requests answered, by area (address: public addresses, api: the bare domain) and status code.",
		}, []string{"area", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "relay_http_request_duration_seconds",
			Help:    "Time from request to answer, by area; for addresses it includes the durable append and any forward.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"area"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "relay_http_requests_in_flight",
			Help: "Requests being handled now, by area, open WebSockets included.",
		}, []string{"area"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_http_connections_refused_total",
			Help: "Connections answered and closed at accept: 429 when their client address or network held --max-conns-per-ip or --max-conns-per-network already, 503 when the relay held its descriptor-derived cap.",
		}),
		refusedRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "relay_http_requests_refused_total",
			Help: "Requests answered 429 because their client address or network had --max-requests-per-ip or --max-requests-per-network in flight already (over all its connections).",
		}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.inFlight, m.refused, m.refusedRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Positions reports the log's and the views' positions; their difference is
// how far the history lags behind what was appended.
func (m *Metrics) Positions(logPosition func(context.Context) (uint64, error), viewsPosition func() uint64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "relay_log_position", Help: "Position of the newest event in the log."},
			func() float64 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				p, err := logPosition(ctx)
				if err != nil {
					return -1
				}
				return float64(p)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "relay_views_position", Help: "Position the views have applied."},
			func() float64 { return float64(viewsPosition()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_views_lag_positions",
			Help: "How many log positions the views are behind the log (-1 when the log is unreadable); alert when it keeps growing.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			p, err := logPosition(ctx)
			if err != nil {
				return -1
			}
			v := viewsPosition()
			if p <= v {
				return 0
			}
			return float64(p - v)
		}),
	)
}

// ViewsFailing reports whether the views' runner is failing (1) and
// retrying, or following the log (0).
func (m *Metrics) ViewsFailing(failing func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_views_failing",
		Help: "1 while applying events to the views fails (the relay retries with backoff), else 0.",
	}, func() float64 {
		if failing() {
			return 1
		}
		return 0
	}))
}

// Quotas reports the requests this node refused by accounts' quotas, by
// reason (storage, rate), and the bytes every account's deliveries take in
// the log. No account is a label: the series stay fixed however many
// accounts there are (relay accounts usage names the top ones).
func (m *Metrics) Quotas(refusals func() map[string]int64, stored func(context.Context) (int64, error)) {
	for _, reason := range []string{"storage", "rate"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "relay_account_quota_refusals_total",
			Help:        "Requests to Endpoints this node refused by their account's quota, by reason: storage (507) or rate (429).",
			ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 { return float64(refusals()[reason]) }))
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "relay_accounts_stored_bytes",
		Help: "Log bytes the deliveries of every account's Endpoints take together (-1 when the views are unreadable).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n, err := stored(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
}

// BodyBudget reports the body budget (--proxy-body-budget), what the
// bodies in flight hold of it, and the bodies it refused (503) by the
// share that was full: relay, client, network, account or reserve.
func (m *Metrics) BodyBudget(total int64, inUse func() int64, shares []string, refusals func() map[string]int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_body_budget_bytes",
			Help: "The memory forwarded bodies in flight may hold together (--proxy-body-budget).",
		}, func() float64 { return float64(total) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_body_budget_in_use_bytes",
			Help: "The memory forwarded bodies in flight hold now.",
		}, func() float64 { return float64(inUse()) }),
	)
	for _, share := range shares {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "relay_body_budget_refusals_total",
			Help:        "Bodies the body budget refused (503 to a sender, an attempt or copy held back), by the share that was full: relay (the whole budget), client (a sender's quarter), network (a client network's half), account (an account's quarter), reserve (the last quarter, kept for small holders).",
			ConstLabels: prometheus.Labels{"share": share},
		}, func() float64 { return float64(refusals()[share]) }))
	}
}

// Guests reports what the relay's guest inspectors store together, the
// storage they may (--guest-storage; 0: off), and what that bound refused,
// by what (delivery: 507 to a sender; api: createInspector, /new,
// setInspectorAnswer) and reason (guests: the whole budget; network: one
// client network's share). No network is a label.
func (m *Metrics) Guests(stored func() int64, budget int64, refusals func() map[string]map[string]int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_guest_stored_bytes",
			Help: "Log bytes every guest inspector together takes (deliveries, own events, refusal counts), as the views have applied them.",
		}, func() float64 { return float64(stored()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_guest_storage_bytes",
			Help: "The log bytes guest inspectors may take together (--guest-storage; 0: off); one client network's inspectors a sixteenth of it.",
		}, func() float64 { return float64(budget) }),
	)
	for _, what := range []string{"delivery", "api"} {
		for _, reason := range []string{"guests", "network"} {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "relay_guest_storage_refusals_total",
				Help:        "What the storage for guests refused on this node, by what (delivery: 507; api: createInspector, /new, setInspectorAnswer QUOTA_EXCEEDED) and reason (guests: --guest-storage used up; network: a client network's sixteenth).",
				ConstLabels: prometheus.Labels{"what": what, "reason": reason},
			}, func() float64 { return float64(refusals()[what][reason]) }))
		}
	}
}

// UnrecordedRefusals reports the requests this node refused by their
// address's rate limit whose counts were not appended to the log, because
// what counts the address's bytes kept for good was used up.
func (m *Metrics) UnrecordedRefusals(n func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "relay_address_refusals_unrecorded_total",
		Help: "Requests refused by their address's rate limit (429) whose count was not added to the log, because the inspector's quota, the guests' storage or the Endpoint's account's quota was used up.",
	}, func() float64 { return float64(n()) }))
}

// DiskReserve reports the free disk under the data folder, the reserve
// (--min-free-disk) and its level (0 clear, 1 new work refused, 2
// deliveries refused too), and what the reserve refused, by what (delivery:
// 507 answers; api: sign-ups, inspectors, Endpoints, retries, redrives;
// answer: answers recorded without their bodies).
// Scrapes read the reserve's last reading: no statfs of their own.
func (m *Metrics) DiskReserve(state func() diskreserve.State, refusals func() map[string]int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_disk_free_bytes",
			Help: "Bytes the relay may still write on the data folder's file system (-1 when they cannot be read).",
		}, func() float64 {
			s := state()
			if s.Err != nil {
				return -1
			}
			return float64(s.Free)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_disk_reserve_bytes",
			Help: "The reserve of free disk (--min-free-disk): below twice it new work is refused, below it every delivery.",
		}, func() float64 { return float64(state().Reserve) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relay_disk_reserve_level",
			Help: "0: at least twice the reserve free; 1: sign-ups, new inspectors and Endpoints and inspectors' deliveries refused; 2: every delivery refused too.",
		}, func() float64 { return float64(state().Level) }),
	)
	for _, what := range diskreserve.Kinds() {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "relay_disk_reserve_refusals_total",
			Help:        "What this node refused because the free disk was below the reserve: delivery (answered 507), api (INSUFFICIENT_STORAGE) or answer (an attempt's answer recorded without its body).",
			ConstLabels: prometheus.Labels{"what": what},
		}, func() float64 { return float64(refusals()[what]) }))
	}
}

// ConnectionRefused counts one connection refused over a connection cap
// (its address's, its network's or the relay's).
func (m *Metrics) ConnectionRefused() { m.refused.Inc() }

// RequestRefused counts one request refused over the per-address cap of
// requests in flight.
func (m *Metrics) RequestRefused() { m.refusedRequests.Inc() }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Instrument counts and times every request through next; area names the
// request's kind from its Host.
func (m *Metrics) Instrument(next http.Handler, area func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		a := area(r)
		inFlight := m.areas.get(a, func() prometheus.Gauge { return m.inFlight.WithLabelValues(a) })
		inFlight.Inc()
		defer inFlight.Dec()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		series := m.answers.get(answerKey{a, rec.code}, func() answerSeries {
			s := answerSeries{requests: m.requests.WithLabelValues(a, strconv.Itoa(rec.code))}
			if rec.code != http.StatusSwitchingProtocols {
				// A WebSocket returns when the session ends, hours later:
				// its length is not a request latency.
				s.duration = m.duration.WithLabelValues(a)
			}
			return s
		})
		series.requests.Inc()
		if series.duration != nil {
			series.duration.Observe(time.Since(start).Seconds())
		}
	})
}

// cache maps the few keys a handler meets (areas, status codes: at most
// a few thousand) to their series. It is read without a lock: a new key
// replaces the whole map, under mu.
type cache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

// get returns k's value, made by add the first time k is asked for.
func (c *cache[K, V]) get(k K, add func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	next := make(map[K]V, len(mapOrNil(old))+1)
	for key, v := range mapOrNil(old) {
		next[key] = v
	}
	v := add()
	next[k] = v
	c.m.Store(&next)
	return v
}

func mapOrNil[K comparable, V any](m *map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	return *m
}

type statusRecorder struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wroteHeader {
		s.code, s.wroteHeader = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Hijack hands the connection over for WebSocket upgrades (gorilla asserts
// http.Hijacker directly). A hijacked request counts as 101.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("hijack: %T is not an http.Hijacker", s.ResponseWriter)
	}
	s.code, s.wroteHeader = http.StatusSwitchingProtocols, true
	return h.Hijack()
}

// Flush passes streaming writes on.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
