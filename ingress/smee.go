package ingress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/clientkey"
	"github.com/relayhq/relay/ratelimit"
	"github.com/relayhq/relay/readmodel"
)

// Bounds of smee streams (docs/security.md, "smee streams"). A stream holds
// one event at a time: the next delivery is read only once the previous
// event is written, so a client that stops reading holds one event until
// the connection's write deadline drops it.
const (
	// MaxStreamsPerAddress is how many smee streams one address serves at
	// once; one more is answered 429.
	MaxStreamsPerAddress = 128
	// MaxStreamsPerClient is how many smee streams one client (its IP, or
	// its /64: clientkey) holds open at once, over any number of
	// connections: an HTTP/2 connection carries many streams, so the
	// per-address connection cap does not bound them. As many as one
	// address serves, so 32 clients at least share the relay's streams.
	MaxStreamsPerClient = 128
	// MaxStreamsPerNetwork is how many smee streams one client network
	// (clientkey.Network: an IPv4 /24, an IPv6 /48) holds open at once over
	// all its clients, which would otherwise each hold
	// MaxStreamsPerClient: 8 networks at least share the relay's streams.
	MaxStreamsPerNetwork = clientkey.NetworkShare * MaxStreamsPerClient
	// DefaultMaxStreams bounds the smee streams of the whole relay.
	DefaultMaxStreams = 4096
	// StreamsReservedShare: the last 1/StreamsReservedShare of the
	// relay's streams is kept for client networks (a client without one:
	// the client) that hold at most StreamsSmallHolding with the new one.
	// Without it 8 networks of MaxStreamsPerNetwork held every stream, and
	// every other tenant's smee client was refused.
	StreamsReservedShare = 4
	// StreamsSmallHolding is the most a network may hold and still take
	// from the reserved share: a team's few smee clients, not a flood.
	StreamsSmallHolding = 16
	// StreamPingInterval is how often an idle stream gets a comment line,
	// so that proxies do not close it as idle.
	StreamPingInterval = 25 * time.Second
	// StreamWriteTimeout drops a client that does not take an event in
	// this long (the listener's own write deadline may be shorter).
	StreamWriteTimeout = 30 * time.Second
	// ReplayMaxEvents and ReplayMaxBytes bound what a client that
	// reconnects with Last-Event-ID is sent of what it missed: the oldest
	// missed deliveries first, up to these; the rest stay in the history.
	ReplayMaxEvents = 100
	ReplayMaxBytes  = 8 << 20
	// replayWaitComment tells a stream whose replay waits for admission
	// (DefaultReplayRate) why nothing comes yet; it repeats as its ping.
	replayWaitComment = ": replay waits: this client reconnected too often\n\n"
	// streamEventSlack is what an event may take besides the stored body
	// and headers: field names, query, timestamp, id.
	streamEventSlack = 16 << 10
)

// DefaultReplayRate admits replays after Last-Event-ID per client (its IP,
// or its /64, grouped by network as every per-client rate): each reads up
// to ReplayMaxEvents deliveries from the log, so a client that reconnects
// in a loop costs at most 16 replays at once and then one a second, however
// many streams it holds. A replay not admitted waits, its stream open,
// until it is: a client that reconnects honestly misses nothing.
var DefaultReplayRate = ratelimit.Rate{N: 60, Per: time.Minute, Burst: 16}

// Feed is what smee streams read: the live feed of an address's history
// (projections.History, the same one the deliveries subscription reads).
type Feed interface {
	Watch(address string) (<-chan readmodel.Change, func())
	Delivery(ctx context.Context, id string) (readmodel.Delivery, error)
	// CreatedAfter lists, oldest first, at most limit ids of the address's
	// deliveries received after the one whose cursor is given.
	CreatedAfter(ctx context.Context, address, cursor string, limit int) ([]string, error)
}

// SmeeKeyPath is the path prefix of an Endpoint's smee stream URL: the key
// follows it. smee's clients send no credential, so the key in the URL is
// the Endpoint's stream credential; it is not the account's token.
const SmeeKeyPath = "/smee/"

// smeeKeyMatches tells whether r's path names the key whose SHA-256 (hex)
// is hash; an empty hash matches nothing.
func smeeKeyMatches(r *http.Request, hash string) bool {
	if hash == "" {
		return false
	}
	key, ok := strings.CutPrefix(r.URL.EscapedPath(), SmeeKeyPath)
	if !ok || key == "" || r.URL.RawQuery != "" {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare([]byte(hex.EncodeToString(sum[:])), []byte(hash)) == 1
}

// wantsStream tells whether r is smee's client opening its stream.
func wantsStream(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// streamSlots counts open streams per address, per client and its
// network, and in all.
type streamSlots struct {
	mu      sync.Mutex
	byAddr  map[string]int
	clients clientkey.Caps
	total   int
	max     int
	// reserved is the last part of max kept for networks that hold at
	// most StreamsSmallHolding (max/StreamsReservedShare; 0: none).
	reserved int
}

func (s *streamSlots) acquire(address, client string) (ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byAddr[address] >= MaxStreamsPerAddress {
		return false, fmt.Sprintf("%d streams are open on this address", MaxStreamsPerAddress)
	}
	switch s.clients.Take(client, MaxStreamsPerClient, MaxStreamsPerNetwork) {
	case clientkey.ClientFull:
		return false, fmt.Sprintf("%d streams are open from your address", MaxStreamsPerClient)
	case clientkey.NetworkFull:
		return false, fmt.Sprintf("%d streams are open from your network (%s)", MaxStreamsPerNetwork, clientkey.Network(client))
	}
	if s.total >= s.max {
		s.clients.Release(client)
		return false, "the relay serves as many streams as it may"
	}
	if s.total >= s.max-s.reserved && s.holding(client) > StreamsSmallHolding {
		s.clients.Release(client)
		return false, fmt.Sprintf("the relay's last streams are kept for networks that hold at most %d; yours holds more", StreamsSmallHolding)
	}
	if s.byAddr == nil {
		s.byAddr = map[string]int{}
	}
	s.byAddr[address]++
	s.total++
	return true, ""
}

// holding is what client's network holds (the client, without one),
// its new stream counted. s.mu held.
func (s *streamSlots) holding(client string) int {
	if network := clientkey.Network(client); network != "" {
		return s.clients.NetworkHeld(network)
	}
	return s.clients.Held(client)
}

func (s *streamSlots) release(address, client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.byAddr[address]--; s.byAddr[address] <= 0 {
		delete(s.byAddr, address)
	}
	s.clients.Release(client)
}

// StopStreams ends every open smee stream (on shutdown: http.Server waits
// for handlers, and a stream's never ends by itself). Streams opened later
// end at once.
func (s *Server) StopStreams() { s.stopStreams.Do(func() { close(s.streamsDone) }) }

// serveSmee serves smee's event stream of an address: a ready event, then
// one message event per delivery received from now on (and, with
// Last-Event-ID, those received after that one first), each with the
// delivery's cursor as its id. Nothing about the stream is recorded.
func (s *Server) serveSmee(ctx context.Context, w http.ResponseWriter, r *http.Request, route Route) {
	if s.deps.Feed == nil {
		writeNoAgent(w, "streams unavailable")
		return
	}
	client := clientkey.Of(sender(r).Addr)
	ok, why := s.streams.acquire(route.ID, client)
	if !ok {
		writeText(w, http.StatusTooManyRequests, "Too Many Requests: "+why+"\n")
		return
	}
	defer s.streams.release(route.ID, client)

	// Watch before reading the replay: a delivery lands in one or both,
	// never in neither; last drops the repeats.
	changes, stop := s.deps.Feed.Watch(route.ID)
	defer stop()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on at once
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w)}
	if sw.write([]byte("event: ready\ndata: {}\n\n")) != nil {
		return
	}

	var last uint64 // position of the newest delivery sent
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if err := s.admitReplay(ctx, sw, client); err != nil {
			s.log.DebugContext(ctx, "smee stream ended waiting for its replay", "address", route.ID, "error", err)
			return
		}
		// The replay's reads are the client's: they count against its
		// share of the views' readers, as its API reads do. Live events
		// below are the relay's own reads, shared by every stream.
		rctx := readmodel.WithReader(ctx, readmodel.ReaderKey(client))
		var err error
		if last, err = s.replaySmee(rctx, sw, route.ID, id); err != nil {
			s.log.DebugContext(ctx, "smee stream ended in replay", "address", route.ID, "error", err)
			return
		}
	}

	ping := time.NewTicker(StreamPingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.streamsDone:
			return
		case <-ping.C:
			if !s.streamAllowed(ctx, route) || sw.write([]byte(": ping\n\n")) != nil {
				return
			}
		case ch, ok := <-changes:
			if !ok || ch.Behind {
				// The feed dropped this watcher (it fell behind) or the
				// views closed: end the stream, and the client's
				// reconnect with Last-Event-ID catches up.
				return
			}
			if !ch.New || ch.Position <= last {
				continue
			}
			if !s.streamAllowed(ctx, route) {
				return
			}
			pos, err := s.sendSmee(ctx, sw, ch.DeliveryID, last)
			if err != nil {
				return
			}
			last = max(last, pos)
		}
	}
}

// streamAllowed tells whether an Endpoint's stream may go on: its key was
// neither revoked nor replaced and the Endpoint not deleted since the
// stream opened. The address is read from the resolver's cache, so the
// check costs no query while nothing changed. An inspector's stream ends
// only with the inspector's expiry, which requests record.
func (s *Server) streamAllowed(ctx context.Context, opened Route) bool {
	if opened.Kind != domain.AddressEndpoint {
		return true
	}
	now, err := s.deps.Resolver.Resolve(ctx, opened.ID)
	return err == nil && !now.Deleted && now.SmeeKeyHash == opened.SmeeKeyHash
}

// admitReplay waits until client may replay what it missed (ReplayRate),
// writing a comment to the stream while it waits: the comment says why
// nothing comes, and keeps proxies from closing the stream as idle. Live
// deliveries wait in the stream's watch meanwhile, so none is missed.
func (s *Server) admitReplay(ctx context.Context, sw *streamWriter, client string) error {
	for {
		ok, retry := s.replays.Allow(client, time.Now())
		if ok {
			return nil
		}
		if err := sw.write([]byte(replayWaitComment)); err != nil {
			return err
		}
		t := time.NewTimer(min(retry, StreamPingInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-s.streamsDone:
			t.Stop()
			return errors.New("streams stopped")
		case <-t.C:
		}
	}
}

// replaySmee sends what a reconnecting client missed after the delivery
// whose cursor is lastID, within ReplayMaxEvents and ReplayMaxBytes. An id
// that is not a cursor replays nothing. It returns the newest position sent.
func (s *Server) replaySmee(ctx context.Context, sw *streamWriter, address, lastID string) (uint64, error) {
	ids, err := s.deps.Feed.CreatedAfter(ctx, address, lastID, ReplayMaxEvents)
	var invalid *domain.InvalidInputError
	switch {
	case errors.As(err, &invalid):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("list missed deliveries: %w", err)
	}
	var last uint64
	for _, id := range ids {
		if sw.written >= ReplayMaxBytes {
			break
		}
		pos, err := s.sendSmee(ctx, sw, id, last)
		if err != nil {
			return last, err
		}
		last = max(last, pos)
	}
	return last, nil
}

// sendSmee writes one delivery's event unless it is at or before after.
// The event is shared with the other streams (eventCache). A delivery
// that cannot be read or encoded is logged and skipped.
func (s *Server) sendSmee(ctx context.Context, sw *streamWriter, id string, after uint64) (uint64, error) {
	e, err := s.events.Get(ctx, id, func() (smeeEncoded, error) {
		// Not the stream's context: the load is shared, and one stream
		// that goes away must not fail it for the others.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StreamWriteTimeout)
		defer cancel()
		d, err := s.deps.Feed.Delivery(lctx, id)
		if err != nil {
			return smeeEncoded{}, fmt.Errorf("read delivery: %w", err)
		}
		ev, err := smeeEvent(d, s.maxStreamEvent())
		return smeeEncoded{pos: d.Position, ev: ev}, err
	})
	pos, ev := e.pos, e.ev
	switch {
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case err != nil:
		s.log.WarnContext(ctx, "smee stream: skipped a delivery", "delivery_id", id, "error", err)
		return pos, nil
	case pos <= after:
		return 0, nil
	}
	return pos, sw.write(ev)
}

// smeeEncoded is a delivery's event as the streams share it (Server.events:
// every stream of an address sends the same delivery at about the same
// time, so it is read and encoded once, not once per stream).
type smeeEncoded struct {
	pos uint64
	ev  []byte
}

// maxStreamEvent is the most one event may carry: the stored body and
// headers with room for the rest. A delivery whose event would be larger
// is sent without its body.
func (s *Server) maxStreamEvent() int {
	return int(s.cfg.CaptureCap + 2*s.cfg.MaxHeaderBytes + streamEventSlack)
}

// Values of the x-relay-smee-body field, set when the event carries no
// body of the delivery: smee's client forwards it as a header, so the
// local process can tell an empty body from one left out.
const (
	smeeBodyIncomplete = "omitted: larger than the relay's capture cap; the first part is in the history"
	smeeBodyNotJSON    = "omitted: not JSON or form data; the body is in the history"
	smeeBodyTooLarge   = "omitted: the event would exceed the stream's event cap; the body is in the history"
)

// smeeEvent is a delivery as smee's message event: its headers (lower-case
// names, repeats joined with ", ", hop-by-hop ones left out) with body,
// query and timestamp. A JSON body is carried as it arrived, with the
// insignificant whitespace taken out (key order and number text kept, so
// that a client that parses and serialises it again usually gets the
// sender's bytes back); form data as an object; anything else, or an
// incomplete body, as {}.
func smeeEvent(d readmodel.Delivery, maxBytes int) ([]byte, error) {
	// Repeats are gathered and joined once: joining each onto the line so
	// far copied it every time, 7.2 MB for 200 values of 320 bytes.
	values := map[string][]string{}
	var names []string
	for _, h := range domain.StripHopByHop(d.Headers) {
		name := strings.ToLower(h.Name)
		if _, ok := values[name]; !ok {
			names = append(names, name)
		}
		values[name] = append(values[name], h.Value)
	}
	fields := make(map[string]any, len(names)+5)
	for _, name := range names {
		fields[name] = strings.Join(values[name], ", ")
	}
	if _, ok := fields["host"]; !ok && d.Host != "" {
		fields["host"] = d.Host // as smee.io gives it; its client drops it
	}
	fields["query"] = smeeQuery(d.Target)
	fields["timestamp"] = d.ReceivedAt.UnixMilli()
	body, omitted := smeeBody(d)
	fields["body"] = body
	if omitted != "" {
		fields["x-relay-smee-body"] = omitted
	}
	ev, err := encodeSmee(d.Cursor, fields)
	if err != nil {
		return nil, err
	}
	if len(ev) > maxBytes {
		fields["body"] = json.RawMessage("{}")
		fields["x-relay-smee-body"] = smeeBodyTooLarge
		if ev, err = encodeSmee(d.Cursor, fields); err != nil {
			return nil, err
		}
		if len(ev) > maxBytes {
			return nil, fmt.Errorf("smee event of %d bytes exceeds %d without its body", len(ev), maxBytes)
		}
	}
	return ev, nil
}

// encodeSmee is one message event with fields as one line of JSON
// (<, > and & stay as they are).
func encodeSmee(id string, fields map[string]any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("id: ")
	b.WriteString(id)
	b.WriteString("\nevent: message\ndata: ")
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil { // ends the line with "\n"
		return nil, fmt.Errorf("encode smee event: %w", err)
	}
	b.WriteString("\n")
	return b.Bytes(), nil
}

// smeeBody is the body smee's format carries, and why it was left out.
func smeeBody(d readmodel.Delivery) (any, string) {
	empty := json.RawMessage("{}")
	switch {
	case !d.Complete:
		return empty, smeeBodyIncomplete
	case len(bytes.TrimSpace(d.Body)) == 0:
		return empty, ""
	case json.Valid(d.Body):
		var b bytes.Buffer
		if err := json.Compact(&b, d.Body); err != nil {
			return empty, smeeBodyNotJSON
		}
		return json.RawMessage(b.Bytes()), ""
	}
	if isForm(d.Headers) {
		if vals, err := url.ParseQuery(string(d.Body)); err == nil {
			return flatten(vals), ""
		}
	}
	return empty, smeeBodyNotJSON
}

func isForm(headers []domain.Header) bool {
	for _, h := range headers {
		if strings.EqualFold(h.Name, "Content-Type") {
			mt, _, err := mime.ParseMediaType(h.Value)
			return err == nil && mt == "application/x-www-form-urlencoded"
		}
	}
	return false
}

// smeeQuery is the request target's query as smee gives it: a string per
// name, a list for a name given more than once.
func smeeQuery(target string) map[string]any {
	_, raw, _ := strings.Cut(target, "?")
	vals, _ := url.ParseQuery(raw) // what parses; a malformed pair is left out
	return flatten(vals)
}

func flatten(vals url.Values) map[string]any {
	out := make(map[string]any, len(vals))
	for k, v := range vals {
		if len(v) == 1 {
			out[k] = v[0]
		} else {
			out[k] = v
		}
	}
	return out
}

// streamWriter writes whole events and flushes them, each within
// StreamWriteTimeout; it counts what it wrote.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	written int
}

func (sw *streamWriter) write(p []byte) error {
	// Not every ResponseWriter supports deadlines (the listener's own
	// write deadline then applies); the error is ignored for that reason.
	_ = sw.rc.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	n, err := sw.w.Write(p)
	sw.written += n
	if err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if err := sw.rc.Flush(); err != nil {
		return fmt.Errorf("flush event: %w", err)
	}
	return nil
}
