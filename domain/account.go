package domain

import "strings"

// Account invariants:
//  1. An account has a non-empty name of at most 100 characters.
//  2. Tokens are stored as SHA-256 hashes only; the token itself never
//     enters an event.

// Account owns Endpoints and the tokens that act for it.
type Account struct {
	aggregate
	id     string
	name   string
	tokens map[string]bool // token ID → active
}

// SignUp creates an account with its first token.
func SignUp(id, name, tokenID, tokenHash string) (*Account, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return nil, &InvalidInputError{Field: "name", Reason: "must be 1 to 100 characters"}
	}
	if len(tokenHash) != 64 {
		return nil, &InvalidInputError{Field: "token hash", Reason: "must be a hex SHA-256"}
	}
	a := &Account{aggregate: newAggregate()}
	a.raise(AccountCreated{AccountID: id, Name: name})
	a.raise(TokenIssued{AccountID: id, TokenID: tokenID, TokenHash: tokenHash})
	return a, nil
}

// LoadAccount rebuilds an account from its stream.
func LoadAccount(events []Event) *Account {
	a := &Account{aggregate: newAggregate()}
	for _, e := range events {
		a.apply(e)
		a.loaded()
	}
	return a
}

func (a *Account) raise(e Event) { a.apply(e); a.changes = append(a.changes, e) }

func (a *Account) apply(e Event) {
	switch e := e.(type) {
	case AccountCreated:
		a.id, a.name = e.AccountID, e.Name
		a.tokens = map[string]bool{}
	case TokenIssued:
		a.tokens[e.TokenID] = true
	case TokenRevoked:
		a.tokens[e.TokenID] = false
	}
}

// ID and Name describe the account.
func (a *Account) ID() string   { return a.id }
func (a *Account) Name() string { return a.name }

// IssueToken adds a token (by hash) to the account.
func (a *Account) IssueToken(tokenID, tokenHash string) error {
	if len(tokenHash) != 64 {
		return &InvalidInputError{Field: "token hash", Reason: "must be a hex SHA-256"}
	}
	a.raise(TokenIssued{AccountID: a.id, TokenID: tokenID, TokenHash: tokenHash})
	return nil
}

// RevokeToken stops a token; revoking an unknown or revoked token raises nothing.
func (a *Account) RevokeToken(tokenID string) {
	if !a.tokens[tokenID] {
		return
	}
	a.raise(TokenRevoked{AccountID: a.id, TokenID: tokenID})
}
