package commands

import (
	"fmt"

	"github.com/relayhq/relay/domain"
)

// sealSecrets returns h with its plain secrets replaced by their stored
// forms under the relay's secrets key: the Meta verify token by its HMAC
// (the relay only compares it), the Zoom secret token sealed (the relay
// computes an HMAC with it). h is validated first, so a field error names
// the field as given. Plain values from older events are sealed too, so a
// later event never repeats them.
func (s *Service) sealSecrets(h *domain.Handshakes) (*domain.Handshakes, error) {
	if !h.HasPlainSecret() {
		return h, nil
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	key := s.cfg.Secrets
	if key == nil {
		return nil, fmt.Errorf("%w: this relay has no secrets key to keep a handshake secret with", domain.ErrUnavailable)
	}
	c := *h
	if c.MetaVerifyToken != "" {
		c.MetaVerifyTokenMAC, c.MetaVerifyToken = key.MAC(c.MetaVerifyToken), ""
	}
	if c.ZoomSecret != "" {
		sealed, err := key.Seal(c.ZoomSecret)
		if err != nil {
			return nil, err
		}
		c.ZoomSecretSealed, c.ZoomSecret = sealed, ""
	}
	return &c, nil
}
