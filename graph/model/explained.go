package model

import (
	"sync"

	"github.com/relayhq/relay/explain"
)

// ExplanationOnce holds a delivery row's explanation once made: the
// fields that show it (explanation and why, under any alias) are one
// explanation in two forms, so a row makes it, and its reads of the
// views, once. A failed explanation is not kept: the next field tries
// again.
type ExplanationOnce struct {
	mu   sync.Mutex
	done bool
	x    explain.Explanation
}

// Get returns the row's explanation, made by make the first time.
func (o *ExplanationOnce) Get(make func() (explain.Explanation, error)) (explain.Explanation, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return o.x, nil
	}
	x, err := make()
	if err != nil {
		return x, err
	}
	o.x, o.done = x, true
	return x, nil
}
