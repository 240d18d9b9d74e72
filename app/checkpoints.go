package app

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/evidence"
	"github.com/relayhq/relay/record"
)

// DefaultCheckpointInterval is how often the relay signs the log's chain
// when it moved.
const DefaultCheckpointInterval = time.Minute

// chained is a log that keeps the chain (the embedded one).
type chained interface {
	ChainHead(ctx context.Context) (uint64, evidence.Hash, error)
	ReadChain(ctx context.Context, after uint64, limit int) ([]evidence.ChainLink, error)
}

// treeLog is a chained log that keeps the Merkle tree over its chain as it
// writes (the embedded one): a checkpoint then reads no links back.
type treeLog interface {
	ChainTree(ctx context.Context) (evidence.Head, error)
}

// headsLog is a log that keeps a chain per stream (JetStream): its
// checkpoints sign every stream's head.
type headsLog interface {
	evidence.MessageSource
	LastPosition(ctx context.Context) (uint64, error)
}

// checkpointer signs the chain's head at intervals and records the
// signature in the log (domain.LogCheckpointed).
type checkpointer struct {
	log   chained
	heads headsLog // instead of log, on a log with a chain per stream
	// signer keeps the stream heads of heads; the first checkpoint reads
	// the whole log, later ones what came since.
	signer evidence.HeadsSigner
	rec    *record.Recorder
	key    ed25519.PrivateKey
	l      *slog.Logger
	ownAt  uint64 // position of the last checkpoint it recorded
	// tree grows with the chain: the first checkpoint reads every leaf,
	// later ones only those since (its memory is a few dozen hashes).
	tree   evidence.Tree
	treeAt uint64 // the position of its last leaf
}

// checkpoint signs the head unless nothing but its own last checkpoint
// was appended since; it returns the position it signed (0: none).
func (c *checkpointer) checkpoint(ctx context.Context) (uint64, error) {
	if c.heads != nil {
		return c.checkpointHeads(ctx)
	}
	h, err := c.head(ctx)
	if err != nil || h.Position == 0 || h.Position == c.ownAt {
		return 0, err
	}
	pos, link := h.Position, h.Link
	e := domain.LogCheckpointed{
		Position: pos, Link: link.String(), TreeSize: h.TreeSize, Root: h.Root.String(),
		PublicKey: evidence.FormatPublicKey(c.key.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(evidence.Sign(c.key, h)),
	}
	res, err := c.rec.Record(ctx, domain.CheckpointStream, domain.Any(), domain.Trace{}, e)
	if err != nil {
		return 0, err
	}
	c.ownAt = res.Position
	return pos, nil
}

// checkpointHeads signs every stream's head at the log's last position,
// unless nothing but checkpoints was appended since the newest checkpoint
// (any node's: every node of a cluster signs, each checkpoint stands alone).
func (c *checkpointer) checkpointHeads(ctx context.Context) (uint64, error) {
	pos, err := c.heads.LastPosition(ctx)
	if err != nil || pos == 0 || pos == c.ownAt {
		return 0, err
	}
	if err := c.signer.Advance(ctx, c.heads, pos); err != nil {
		return 0, err
	}
	if !c.signer.Moved() {
		return 0, nil
	}
	cp := c.signer.Sign(c.key)
	e := domain.LogCheckpointed{
		Position: cp.Position, TreeSize: cp.TreeSize, Root: cp.Root, Chain: cp.Chain,
		PublicKey: evidence.FormatPublicKey(c.key.Public().(ed25519.PublicKey)), Signature: cp.Signature,
	}
	res, err := c.rec.Record(ctx, domain.CheckpointStream, domain.Any(), domain.Trace{}, e)
	if err != nil {
		return 0, err
	}
	c.ownAt = res.Position
	return pos, nil
}

// head is the chain's head and the tree over its leaves: the log's own
// when it keeps one, else grown from the links written since the last call.
func (c *checkpointer) head(ctx context.Context) (evidence.Head, error) {
	if t, ok := c.log.(treeLog); ok {
		return t.ChainTree(ctx)
	}
	pos, link, err := c.log.ChainHead(ctx)
	if err != nil || pos == 0 || pos == c.ownAt {
		return evidence.Head{Position: pos}, err
	}
	if err := c.grow(ctx, pos); err != nil {
		return evidence.Head{}, err
	}
	return evidence.Head{Position: pos, Link: link, TreeSize: c.tree.Size(), Root: c.tree.Root()}, nil
}

// grow adds the chain's leaves up to position to the tree.
func (c *checkpointer) grow(ctx context.Context, to uint64) error {
	for c.treeAt < to {
		links, err := c.log.ReadChain(ctx, c.treeAt, 1000)
		if err != nil {
			return fmt.Errorf("read the chain after %d: %w", c.treeAt, err)
		}
		if len(links) == 0 {
			return fmt.Errorf("the chain ends at %d, its head is %d", c.treeAt, to)
		}
		for _, l := range links {
			if l.Position > to {
				return nil
			}
			c.tree.Add(l.Leaf)
			c.treeAt = l.Position
		}
	}
	return nil
}

// checkpointer is the app's checkpointer, nil when the log keeps no chain
// or checkpoints are off. It reads (or creates) the signing key.
func (a *App) checkpointer(cfg Config, log *slog.Logger) (*checkpointer, error) {
	heads, _ := a.logAsIs.(headsLog)
	if a.chain == nil && heads == nil || cfg.CheckpointInterval <= 0 {
		return nil, nil
	}
	path := cfg.CheckpointKey
	if path == "" {
		path = filepath.Join(cfg.Data, "checkpoint.key")
	}
	key, err := evidence.LoadOrCreateKey(path)
	if err != nil {
		return nil, err
	}
	if a.chain == nil {
		return &checkpointer{heads: heads, rec: a.rec, key: key, l: log}, nil
	}
	return &checkpointer{log: a.chain, rec: a.rec, key: key, l: log}, nil
}

// run checkpoints every interval until ctx ends, and once more as it ends.
func (c *checkpointer) run(ctx context.Context, every time.Duration) {
	// A log that keeps the tree builds it from its chain on the first call
	// and keeps it from then on: now, while the log is as short as it
	// will ever be in this run, rather than at the first checkpoint.
	if t, ok := c.log.(treeLog); ok {
		if _, err := t.ChainTree(ctx); err != nil && ctx.Err() == nil {
			c.l.Warn("read the log's chain", "error", err)
		}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if _, err := c.checkpoint(context.WithoutCancel(ctx)); err != nil {
				c.l.Warn("sign the log's chain at shutdown", "error", err)
			}
			return
		case <-t.C:
			if _, err := c.checkpoint(ctx); err != nil && ctx.Err() == nil {
				c.l.Warn("sign the log's chain", "error", err)
			}
		}
	}
}
