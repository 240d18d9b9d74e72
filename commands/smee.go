package commands

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
	"github.com/relayhq/relay/readmodel"
)

// smeeKeyBytes is the size of an Endpoint's smee stream key: 256 random
// bits, as for tokens.
const smeeKeyBytes = 32

// SmeeKeyHash is how a smee stream key is stored and compared: SHA-256,
// hex. Ingress hashes the key a stream request names with it.
func SmeeKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// IssueSmeeKey gives an Endpoint a new smee stream key, replacing any
// earlier one, and returns the key: it is shown this once, only its hash
// is recorded. by is the member who asked ("" for none).
func (s *Service) IssueSmeeKey(ctx context.Context, accountID, by, id string) (string, readmodel.Endpoint, error) {
	raw := make([]byte, smeeKeyBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", readmodel.Endpoint{}, fmt.Errorf("smee key: %w", err)
	}
	key := base64.RawURLEncoding.EncodeToString(raw)
	// The key's hash is appended to the Endpoint's stream, which counts
	// in the account's stored bytes; revoking one is always taken.
	if err := s.checkStorage(ctx, accountID); err != nil {
		return "", readmodel.Endpoint{}, err
	}
	ep, err := s.setSmeeKey(ctx, accountID, by, id, SmeeKeyHash(key))
	if err != nil {
		return "", readmodel.Endpoint{}, err
	}
	return key, ep, nil
}

// RevokeSmeeKey takes an Endpoint's smee stream key away; its open streams
// end and requests naming it are deliveries like any other.
func (s *Service) RevokeSmeeKey(ctx context.Context, accountID, by, id string) (readmodel.Endpoint, error) {
	return s.setSmeeKey(ctx, accountID, by, id, "")
}

func (s *Service) setSmeeKey(ctx context.Context, accountID, by, id, hash string) (readmodel.Endpoint, error) {
	err := conflict.Retry(ctx, conflictTries, func(int) error {
		ep, err := s.loadEndpoint(ctx, accountID, id)
		if err != nil {
			return err
		}
		if err := ep.SetSmeeKey(by, hash); err != nil {
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
