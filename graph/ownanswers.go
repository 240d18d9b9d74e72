package graph

import (
	"encoding/base64"
	"strings"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/graph/model"
	"github.com/relayhq/relay/readmodel"
)

// fromAnswerInput reads an address's own answer; the domain checks its
// limits (domain.Answer.Validate).
func fromAnswerInput(in *model.AnswerInput) (*domain.Answer, error) {
	if in == nil {
		return nil, nil
	}
	a := &domain.Answer{Status: in.Status}
	var err error
	if a.Headers, err = fromHeaderInputs(in.Headers); err != nil {
		return nil, &domain.InvalidInputError{Field: "answer.headers", Reason: "a valueBase64 is not valid base64"}
	}
	switch {
	case in.BodyBase64 != nil:
		if a.Body, err = base64.StdEncoding.DecodeString(*in.BodyBase64); err != nil {
			return nil, &domain.InvalidInputError{Field: "answer.bodyBase64", Reason: "not valid base64"}
		}
	case in.Body != nil:
		a.Body = []byte(*in.Body)
	}
	return a, nil
}

// fromHandshakesInput reads what to change in an address's handshakes.
func fromHandshakesInput(in *model.HandshakesInput) *commands.HandshakesPatch {
	if in == nil {
		return nil
	}
	p := &commands.HandshakesPatch{MetaVerifyToken: in.MetaVerifyToken, ZoomSecret: in.ZoomSecret}
	if in.Enabled != nil {
		names := make([]domain.Handshake, 0, len(in.Enabled))
		for _, h := range in.Enabled {
			names = append(names, domain.Handshake(strings.ToLower(string(h))))
		}
		p.Enabled = &names
	}
	if in.InProxy != nil {
		side := domain.HandshakeSide(*in.InProxy)
		p.InProxy = &side
	}
	return p
}

// toAddressAnswer is an address's own answer as the API shows it.
func toAddressAnswer(a readmodel.Answers) *model.AddressAnswer {
	ans := domain.DefaultAnswer
	if a.Answer != nil {
		ans = *a.Answer
	}
	m := &model.AddressAnswer{Status: ans.Status, Headers: toHeaders(ans.Headers), BodyBase64: base64.StdEncoding.EncodeToString(ans.Body)}
	if t := text(ans.Body); t != nil {
		m.Body = *t
	} else {
		m.Body = m.BodyBase64
	}
	return m
}

// toHandshakes shows an address's handshakes; secrets are masked.
func toHandshakes(a readmodel.Answers) *model.Handshakes {
	m := &model.Handshakes{Enabled: []model.Handshake{}, InProxy: model.HandshakeSideLocal}
	h := a.Handshakes
	if h == nil {
		return m
	}
	for _, name := range h.Enabled {
		m.Enabled = append(m.Enabled, model.Handshake(strings.ToUpper(string(name))))
	}
	// Only whether a secret is set: the relay keeps an HMAC of the Meta
	// token and the Zoom secret sealed, and shows neither form.
	m.MetaVerifyTokenSet = h.MetaTokenSet()
	if m.MetaVerifyTokenSet {
		m.MetaVerifyToken = optional(domain.SecretMask)
	}
	m.ZoomSecretSet = h.ZoomSecretSet()
	if h.RelayInProxy() {
		m.InProxy = model.HandshakeSideRelay
	}
	return m
}
