package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/logexport"
)

// Proofs of one delivery's record: `relay events prove`.

// provableLog is a chained log that reads a stream as stored.
type provableLog interface {
	logexport.Chained
	ReadStoredStream(ctx context.Context, stream string, limit int, newestFirst bool) ([]evidence.Event, error)
}

// maxProvedEvents bounds the events of one delivery a proof holds.
const maxProvedEvents = 1000

// proveDelivery proves a delivery's events against the newest checkpoint.
// It reads the chain's leaves up to the checkpoint (32 bytes each).
func proveDelivery(ctx context.Context, l provableLog, id string) (evidence.Proof, error) {
	events, err := l.ReadStoredStream(ctx, domain.DeliveryStream(id), maxProvedEvents, false)
	if err != nil {
		return evidence.Proof{}, err
	}
	if len(events) == 0 {
		return evidence.Proof{}, fmt.Errorf("prove: no delivery %q in the log (deleted by retention, or never received)", id)
	}
	last, err := l.ReadStoredStream(ctx, domain.CheckpointStream, 1, true)
	if err != nil {
		return evidence.Proof{}, err
	}
	var c evidence.Checkpoint
	if len(last) == 1 {
		if err := json.Unmarshal(last[0].Data, &c); err != nil {
			return evidence.Proof{}, fmt.Errorf("prove: the newest checkpoint does not decode: %w", err)
		}
	}
	newest := events[len(events)-1].Position
	if len(last) == 0 || c.Position < newest {
		return evidence.Proof{}, fmt.Errorf("prove: no checkpoint signs delivery %s yet (its last event is at position %d); the relay signs the log every --checkpoint-interval and at shutdown", id, newest)
	}
	if c.Root == "" {
		return evidence.Proof{}, errors.New("prove: the newest checkpoint signs no Merkle tree (written by an older relay); wait for the next one")
	}
	leaves := make([]evidence.Hash, 0, c.TreeSize)
	index := make([]uint64, len(events))
	next := 0
	for after := uint64(0); after < c.Position; {
		links, err := l.ReadChain(ctx, after, 10000)
		if err != nil {
			return evidence.Proof{}, err
		}
		if len(links) == 0 {
			break
		}
		for _, link := range links {
			if link.Position > c.Position {
				break
			}
			if next < len(events) && link.Position == events[next].Position {
				index[next] = uint64(len(leaves))
				next++
			}
			leaves = append(leaves, link.Leaf)
		}
		after = links[len(links)-1].Position
	}
	if next < len(events) {
		return evidence.Proof{}, fmt.Errorf("prove: event at position %d has no link in the chain: verify the log", events[next].Position)
	}
	return evidence.Prove(c, leaves, events, index)
}

// provableStreams is a log with a chain per stream that reads a stream's
// newest event in one request.
type provableStreams interface {
	evidence.MessageSource
	LastEvent(ctx context.Context, stream string) (domain.RecordedEvent, error)
}

// proveStreamDelivery proves a delivery's stream against the newest
// checkpoint over stream heads. It reads the whole log (every stream's head
// at the checkpoint's position); its memory is one head per stream.
func proveStreamDelivery(ctx context.Context, l provableStreams, id string) (evidence.StreamProof, error) {
	stream := domain.DeliveryStream(id)
	newest, err := l.LastEvent(ctx, stream)
	switch {
	case errors.Is(err, domain.ErrStreamNotFound), errors.Is(err, domain.ErrStreamDeleted):
		return evidence.StreamProof{}, fmt.Errorf("prove: no delivery %q in the log (deleted by retention, or never received)", id)
	case err != nil:
		return evidence.StreamProof{}, err
	}
	last, err := l.LastEvent(ctx, domain.CheckpointStream)
	if err != nil && !errors.Is(err, domain.ErrStreamNotFound) {
		return evidence.StreamProof{}, err
	}
	var c evidence.Checkpoint
	if err == nil {
		if err := json.Unmarshal(last.Data, &c); err != nil {
			return evidence.StreamProof{}, fmt.Errorf("prove: the newest checkpoint does not decode: %w", err)
		}
	}
	if err != nil || c.Position < newest.Position {
		return evidence.StreamProof{}, fmt.Errorf("prove: no checkpoint signs delivery %s yet (its last event is at position %d); wait for the next one: every relay signs the log every --checkpoint-interval and at shutdown", id, newest.Position)
	}
	if c.Chain != evidence.HeadsChain {
		return evidence.StreamProof{}, errors.New("prove: the newest checkpoint signs no stream heads (written by an older relay); wait for the next one")
	}
	p, err := evidence.ProveStream(ctx, l, stream, c, maxProvedEvents)
	if errors.Is(err, evidence.ErrNoCheckpointYet) {
		return evidence.StreamProof{}, fmt.Errorf("prove: %w; wait for the next checkpoint (every --checkpoint-interval, and at shutdown)", err)
	}
	if err != nil {
		return evidence.StreamProof{}, fmt.Errorf("prove: %w", err)
	}
	return p, nil
}
