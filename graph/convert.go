package graph

import (
	"encoding/base64"
	"github.com/relayhq/relay/domain/duration"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/explain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/readmodel"
)

func toHeaders(hs []domain.Header) []*model.Header {
	out := make([]*model.Header, 0, len(hs))
	for _, h := range hs {
		out = append(out, &model.Header{Name: h.Name, Value: h.Value, ValueBase64: rawBase64(h.Value)})
	}
	return out
}

// rawBase64 is s in base64 when it is not valid UTF-8, else nil: GraphQL
// strings are UTF-8, so such bytes would reach a client as U+FFFD; the
// base64 form keeps them, as bodyBase64 does for bodies.
func rawBase64(s string) *string {
	if utf8.ValidString(s) {
		return nil
	}
	b := base64.StdEncoding.EncodeToString([]byte(s))
	return &b
}

func fromHeaderInputs(hs []*model.HeaderInput) ([]domain.Header, error) {
	out := make([]domain.Header, 0, len(hs))
	for _, h := range hs {
		if h == nil {
			continue
		}
		v := h.Value
		if h.ValueBase64 != nil {
			b, err := base64.StdEncoding.DecodeString(*h.ValueBase64)
			if err != nil {
				return nil, &domain.InvalidInputError{Field: "headers.valueBase64", Reason: "not valid base64"}
			}
			v = string(b)
		}
		out = append(out, domain.Header{Name: h.Name, Value: v})
	}
	return out, nil
}

// text returns b as a string when it is valid UTF-8, else nil: binary bodies
// are only offered as base64 so nothing is silently mangled.
func text(b []byte) *string {
	if !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	return &s
}

// optional is s, or nil when it is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func toDelivery(d readmodel.Delivery) *model.Delivery {
	m := &model.Delivery{
		ID: d.ID, Address: d.Address, Method: d.Method, Path: d.Target, PathBase64: rawBase64(d.Target), HTTPVersion: d.Proto,
		Headers: toHeaders(d.Headers), DroppedHeaders: d.DroppedHeaders, RedactedQuery: orNone(d.RedactedQuery), Trailers: toHeaders(d.Trailers), BodyUnread: d.BodyUnread, Body: text(d.Body),
		BodyBase64: base64.StdEncoding.EncodeToString(d.Body),
		BodySize:   int(d.BodySize), Complete: d.Complete, ReceivedAt: d.ReceivedAt,
		ResponseStatus: d.ResponseStatus, ResponseHeaders: toHeaders(d.ResponseHeaders),
		Attempts: make([]*model.Attempt, 0, len(d.Attempts)), Cursor: d.Cursor,
		RemoteAddress: optional(d.RemoteAddr), Duplicates: d.Duplicates, Row: d, Explained: &model.ExplanationOnce{}, Hint: optional(explain.Hint(d)),
		ResponseNotCaptured: optional(d.ResponseNotCaptured),
	}
	if p := d.Provider; p != nil {
		m.Provider = &model.Provider{Name: p.Name, EventType: optional(p.EventType), DeliveryID: optional(p.DeliveryID)}
	}
	if d.ResponseBody != nil {
		b64 := base64.StdEncoding.EncodeToString(d.ResponseBody)
		s := string(d.ResponseBody)
		if !utf8.Valid(d.ResponseBody) {
			s = b64
		}
		m.ResponseBody = &s
		// responseBody alone cannot tell base64 from text that looks like
		// it; these are the bytes, always.
		m.ResponseBodyBase64 = &b64
	}
	for _, a := range d.Attempts {
		at := &model.Attempt{ID: a.ID, Status: a.Status, StartedAt: a.StartedAt, Retry: a.Retry, Late: a.Late, Edit: toEdit(a.Edit),
			Signature: optional(a.Signature), Fidelity: toFidelity(a.Fidelity), AgentID: optional(a.AgentID), Role: model.AttemptRolePrimary,
			Queued: a.Queued, PossibleDuplicate: a.PossibleDuplicate}
		if a.Copy {
			at.Role = model.AttemptRoleCopy
		}
		if a.DurationMs != nil {
			ms := int(*a.DurationMs)
			at.DurationMs = &ms
		}
		if a.Error != "" {
			e := a.Error
			at.Error = &e
		}
		m.Attempts = append(m.Attempts, at)
	}
	return m
}

func toExplanation(x explain.Explanation) *model.Explanation {
	m := &model.Explanation{Status: x.Status, Summary: x.Summary, Facts: make([]*model.ExplanationFact, 0, len(x.Facts))}
	for _, f := range x.Facts {
		m.Facts = append(m.Facts, &model.ExplanationFact{At: f.At, Text: f.Text})
	}
	m.SenderLost = x.SenderLost
	if a := x.Sender; a != nil {
		m.Sender = &model.SenderAnswer{Status: a.Status, Attempt: attemptNumber(a.Attempt), At: a.At}
	}
	if s := x.Shown; s != nil {
		m.Shown = &model.ShownStatus{Status: s.Status, Attempt: attemptNumber(s.Attempt), Kind: model.ShownKind(s.Kind)}
	}
	return m
}

// attemptNumber is an explanation's attempt number for the API: null for
// 0, the relay's own answer.
func attemptNumber(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

func toConnection(p readmodel.Page) *model.DeliveryConnection {
	c := &model.DeliveryConnection{
		Edges:     make([]*model.DeliveryEdge, 0, len(p.Items)),
		Nodes:     make([]*model.Delivery, 0, len(p.Items)),
		PageInfo:  &model.PageInfo{HasNextPage: p.HasNextPage},
		SearchCut: p.SearchCut,
	}
	for _, d := range p.Items {
		n := toDelivery(d)
		c.Edges = append(c.Edges, &model.DeliveryEdge{Cursor: d.Cursor, Node: n})
		c.Nodes = append(c.Nodes, n)
	}
	if p.EndCursor != "" {
		end := p.EndCursor
		c.PageInfo.EndCursor = &end
	}
	return c
}

func (r *Resolver) toInspector(in readmodel.Inspector) *model.Inspector {
	return &model.Inspector{ID: in.ID, URL: r.PublicURL(in.ID), CreatedAt: in.CreatedAt, ExpiresAt: in.ExpiresAt, Expired: in.ExpiredAt(r.now()),
		StoredBytes: int(in.StoredBytes), RefusedRequests: int(in.Refused), Purged: in.Purged,
		Answer: toAddressAnswer(in.Answers), Handshakes: toHandshakes(in.Answers), Smee: in.Smee}
}

func (r *Resolver) toEndpoint(e readmodel.Endpoint) *model.Endpoint {
	m := &model.Endpoint{
		ID: e.ID, Name: e.Name, URL: r.PublicURL(e.ID), Mode: model.EndpointMode(e.Mode),
		ResponseCapture: e.ResponseCapture, CreatedAt: e.CreatedAt,
		RefusedRequests: int(e.Refused), Filters: toFilters(e.Filters),
		Answer: toAddressAnswer(e.Answers), Handshakes: toHandshakes(e.Answers),
		SmeeKey: e.SmeeKey,
	}
	m.AgentCount = r.Hub.Connected(e.ID)
	m.AgentConnected = m.AgentCount > 0
	if e.Target != "" {
		t := e.Target
		m.Target = &t
	}
	m.Retention = r.toRetention(e)
	return m
}

// toRetention says how long an Endpoint keeps its deliveries.
func (r *Resolver) toRetention(e readmodel.Endpoint) *model.Retention {
	limits := r.Service.RetentionLimits()
	w := limits.Window(e.Retention)
	m := &model.Retention{Window: duration.Format(w), Seconds: int(w / time.Second), IsDefault: e.Retention == 0,
		Max: duration.Format(limits.Max)}
	if !e.RetainedTo.IsZero() {
		t := e.RetainedTo
		m.DeletedBefore = &t
	}
	return m
}

// retentionOf reads an Endpoint's retention input: nil leaves it, "default"
// is the relay's default (0); the relay's bounds are checked by the
// command.
func retentionOf(in *string) (*time.Duration, error) {
	if in == nil {
		return nil, nil
	}
	var d time.Duration
	if strings.TrimSpace(*in) != "default" {
		if strings.HasPrefix(strings.TrimSpace(*in), "-") {
			return nil, &domain.InvalidInputError{Field: "retention", Reason: "must be positive"}
		}
		var err error
		if d, err = duration.Parse(*in); err != nil {
			return nil, &domain.InvalidInputError{Field: "retention", Reason: "must be a duration such as 30d, 12h or 90m, or default"}
		}
		if d <= 0 {
			return nil, &domain.InvalidInputError{Field: "retention", Reason: "must be positive"}
		}
	}
	return &d, nil
}

func toEvent(e domain.RecordedEvent) *model.Event {
	m := &model.Event{
		ID: e.ID, Position: strconv.FormatUint(e.Position, 10), Type: e.Type, Stream: e.Stream,
		Revision: strconv.FormatUint(e.Revision, 10), Time: e.Metadata.OccurredAt,
		SchemaVersion: e.Metadata.SchemaVersion, Data: string(domain.ShownPayload(e.Type, e.Data)), // never a member's password hash
	}
	if e.Metadata.CorrelationID != "" {
		c := e.Metadata.CorrelationID
		m.CorrelationID = &c
	}
	if e.Metadata.CausationID != "" {
		c := e.Metadata.CausationID
		m.CausationID = &c
	}
	return m
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func toPatch(in model.UpdateEndpointInput) (commands.EndpointPatch, error) {
	p := commands.EndpointPatch{Name: in.Name, Target: in.Target, ResponseCapture: in.ResponseCapture}
	fs, set, err := filtersOf(in.Filters, in.FilterTexts)
	if err != nil {
		return p, err
	}
	if set {
		p.Filters = &fs
	}
	if in.Mode != nil {
		m := domain.EndpointMode(*in.Mode)
		p.Mode = &m
	}
	if p.Answer, err = fromAnswerInput(in.Answer); err != nil {
		return p, err
	}
	p.Handshakes = fromHandshakesInput(in.Handshakes)
	if p.Retention, err = retentionOf(in.Retention); err != nil {
		return p, err
	}
	if p.Queue, err = queuePatch(in.Queue); err != nil {
		return p, err
	}
	return p, nil
}

// toEdit is an attempt's edit as the API shows it.
func toEdit(e *domain.RequestEdit) *model.RequestEdit {
	if e == nil {
		return nil
	}
	m := &model.RequestEdit{Method: optional(e.Method), Path: optional(e.Target), SetHeaders: toHeaders(e.SetHeaders), UnsetHeaders: e.UnsetHeaders}
	if m.UnsetHeaders == nil {
		m.UnsetHeaders = []string{}
	}
	if e.Body != nil {
		m.Body = text(*e.Body)
		b := base64.StdEncoding.EncodeToString(*e.Body)
		m.BodyBase64 = &b
	}
	return m
}

// fromEditInput is the API's edit as the service takes it (nil: none).
func fromEditInput(in *model.RequestEditInput) (*domain.RequestEdit, error) {
	if in == nil {
		return nil, nil
	}
	e := &domain.RequestEdit{UnsetHeaders: in.UnsetHeaders}
	if in.Method != nil {
		e.Method = *in.Method
	}
	if in.Path != nil {
		e.Target = *in.Path
	}
	var err error
	if e.SetHeaders, err = fromHeaderInputs(in.SetHeaders); err != nil {
		return nil, &domain.InvalidInputError{Field: "edit.setHeaders", Reason: "a valueBase64 is not valid base64"}
	}
	if len(e.SetHeaders) == 0 {
		e.SetHeaders = nil
	}
	switch {
	case in.BodyBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.BodyBase64)
		if err != nil {
			return nil, &domain.InvalidInputError{Field: "edit.bodyBase64", Reason: "not valid base64"}
		}
		e.Body = &b
	case in.Body != nil:
		b := []byte(*in.Body)
		e.Body = &b
	}
	return e, nil
}

// fidelityParts are the API's names of domain's receipt parts.
var fidelityParts = map[string]model.FidelityPart{
	domain.PartRequestLine: model.FidelityPartRequestLine,
	domain.PartHeaders:     model.FidelityPartHeaders,
	domain.PartBody:        model.FidelityPartBody,
}

func toFidelity(f *readmodel.Fidelity) *model.Fidelity {
	out := &model.Fidelity{Status: model.FidelityStatusNotReported, Differences: []model.FidelityPart{}}
	if f == nil {
		return out
	}
	out.Status = model.FidelityStatusIdentical
	for _, d := range f.Differences {
		out.Status = model.FidelityStatusDifferent
		out.Differences = append(out.Differences, fidelityParts[d])
	}
	return out
}

// orNone is a list for a non-null GraphQL list: empty rather than nil.
func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
