package evidence

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
)

// Source is a log to verify: its chain links and its events, each in
// position order. A data folder and an export are sources.
type Source interface {
	Chain(ctx context.Context, after uint64, limit int) ([]ChainLink, error)
	Events(ctx context.Context, after uint64, limit int) ([]Event, error)
}

// Checkpoint is a signed link of the chain: a LogCheckpointed event's
// content, or one an auditor kept.
type Checkpoint struct {
	Position  uint64 `json:"position"`
	Link      string `json:"link"`
	TreeSize  uint64 `json:"tree_size"`
	Root      string `json:"root"`
	Signature string `json:"signature"`
	// Chain is HeadsChain for a checkpoint over stream heads (Link is
	// then empty and TreeSize counts streams); empty for the single chain.
	Chain string `json:"chain,omitempty"`
}

// head is what the checkpoint signs, or an error when it is malformed.
func (c Checkpoint) head() (Head, []byte, error) {
	link, err := ParseHash(c.Link)
	if err != nil {
		return Head{}, nil, err
	}
	root, err := ParseHash(c.Root)
	if err != nil {
		return Head{}, nil, err
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return Head{}, nil, fmt.Errorf("signature: %w", err)
	}
	return Head{Position: c.Position, Link: link, TreeSize: c.TreeSize, Root: root}, sig, nil
}

// Options tune Verify.
type Options struct {
	// PublicKey checks the checkpoints' signatures; nil: they are not
	// checked (Report.Unsigned counts them).
	PublicKey ed25519.PublicKey
	// Kept are checkpoints an auditor kept from an earlier verification:
	// the log must still hold what they sign (else it was cut or changed).
	Kept []Checkpoint
}

// Problem is one thing wrong, at the first event it concerns.
type Problem struct {
	Position uint64 `json:"position"`
	ID       string `json:"id,omitempty"`
	Stream   string `json:"stream,omitempty"`
	Kind     string `json:"kind"`
	Detail   string `json:"detail"`
}

// The kinds of problem.
const (
	DataChanged      = "data changed"
	EventMissing     = "event missing"
	EventInserted    = "event inserted"
	EventsReordered  = "events reordered"
	ChainBroken      = "chain broken"
	BadSignature     = "checkpoint signature invalid"
	CheckpointDiffer = "checkpoint does not match the log"
	Truncated        = "log truncated after a checkpoint"
)

// Report is what Verify found.
type Report struct {
	Events      int64  `json:"events"`      // events read
	Removed     int64  `json:"removed"`     // events deleted by stream deletions the log records
	Deletions   int64  `json:"deletions"`   // those stream deletions
	Head        uint64 `json:"head"`        // the chain's last position
	HeadLink    string `json:"head_link"`   // its link
	Checkpoints int64  `json:"checkpoints"` // checkpoints checked
	// Decisions are the retention decisions the log records (the first
	// maxDecisions of them), which the stream deletions carry out.
	Decisions      []Decision `json:"decisions,omitempty"`
	DecisionsTotal int64      `json:"decisions_total,omitempty"`
	Unsigned       int64      `json:"unchecked_signatures,omitempty"`
	// Streams and Unchained: a log with a chain per stream (VerifyStreams)
	// counts its streams, and the messages older than its first chained one.
	Streams   int64 `json:"streams,omitempty"`
	Unchained int64 `json:"unchained,omitempty"`
	// Last is the newest checkpoint in the log, for an auditor to keep.
	Last     *Checkpoint `json:"last_checkpoint,omitempty"`
	Problems []Problem   `json:"problems,omitempty"`
}

// Decision is a retention decision: an inspector purged with its
// deliveries (inspector.purged.v1), or an Endpoint's deliveries older than
// its window removed (endpoint.retained.v1, with the window and cutoff).
type Decision struct {
	Position    uint64 `json:"position"`
	Type        string `json:"type"`
	Inspector   string `json:"inspector_id,omitempty"`
	Endpoint    string `json:"endpoint_id,omitempty"`
	RetentionMs int64  `json:"retention_ms,omitempty"`
	Cutoff      string `json:"cutoff,omitempty"`
	Deliveries  int64  `json:"deliveries"`
	// AtLeast: the decision counted its deliveries up to a bound, and more
	// went (endpoint.retained.v1's deliveries_at_least).
	AtLeast bool `json:"deliveries_at_least,omitempty"`
}

// maxDecisions bounds the decisions a report lists.
const maxDecisions = 20

// noteDecision counts a retention decision, and lists it among the first
// maxDecisions.
func (r *Report) noteDecision(e Event) {
	r.DecisionsTotal++
	var d Decision
	if len(r.Decisions) < maxDecisions && json.Unmarshal(e.Data, &d) == nil {
		d.Position, d.Type = e.Position, e.Type
		r.Decisions = append(r.Decisions, d)
	}
}

// OK reports whether nothing was found wrong.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// recentLinks is how many recent links (and tree heads) Verify keeps to
// check checkpoints against: a checkpoint signs the head of the moment, a
// few events before it. Its memory, like the rest of Verify's, does not
// grow with the log (only with the problems and the deleted streams it
// finds).
const recentLinks = 1 << 16

// signed is the chain and tree at a position.
type signed struct {
	link Hash
	size uint64
	root Hash
}

// maxProblems bounds the report.
const maxProblems = 100

// Verify checks every leaf against its event, every link against the one
// before, every checkpoint's signature and link, and the kept checkpoints.
func Verify(ctx context.Context, src Source, opts Options) (Report, error) {
	v := &verifier{opts: opts, links: map[uint64]signed{},
		missing: map[string]missingRun{}, deleted: map[string]bool{}, kept: map[uint64]signed{}}
	for _, k := range opts.Kept {
		v.kept[k.Position] = signed{}
	}
	if err := v.walk(ctx, src); err != nil {
		return Report{}, err
	}
	v.finish()
	sortProblems(v.r.Problems)
	if len(v.r.Problems) > maxProblems {
		v.r.Problems = v.r.Problems[:maxProblems]
	}
	return v.r, nil
}

type mismatch struct {
	pos    uint64
	leaf   Hash   // the chain's leaf there
	digest Digest // the event found there
}

type missingRun struct {
	first uint64
	n     int64
}

type verifier struct {
	opts     Options
	r        Report
	prev     Hash
	tree     Tree              // over the chain's leaves so far
	links    map[uint64]signed // recent links and tree heads by position
	order    []uint64          // their positions, oldest first
	pending  []mismatch
	missing  map[string]missingRun // by stream: links whose event is gone
	deleted  map[string]bool       // streams the log records as deleted
	kept     map[uint64]signed     // the log at the kept checkpoints' positions
	lastSeen uint64
}

func (v *verifier) problem(p Problem) { v.r.Problems = addProblem(v.r.Problems, p) }

// addProblem appends p; past twice maxProblems it keeps the maxProblems
// first by position (ties in the order found), as the report does in the
// end, so that a file with a problem on every line costs no more memory
// than one with a hundred.
func addProblem(ps []Problem, p Problem) []Problem {
	ps = append(ps, p)
	if len(ps) >= 2*maxProblems {
		sortProblems(ps)
		ps = ps[:maxProblems]
	}
	return ps
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Position < ps[j].Position })
}

const page = 1000

// walk merges the chain and the events by position.
func (v *verifier) walk(ctx context.Context, src Source) error {
	var (
		links  []ChainLink
		events []Event
		afterL uint64
		afterE uint64
		doneL  bool
		doneE  bool
	)
	for {
		if len(links) == 0 && !doneL {
			var err error
			if links, err = src.Chain(ctx, afterL, page); err != nil {
				return err
			}
			doneL = len(links) == 0
			if !doneL {
				afterL = links[len(links)-1].Position
			}
		}
		if len(events) == 0 && !doneE {
			var err error
			if events, err = src.Events(ctx, afterE, page); err != nil {
				return err
			}
			doneE = len(events) == 0
			if !doneE {
				afterE = events[len(events)-1].Position
			}
		}
		// Two neighbours out of order (lines swapped in an export): put
		// them back in order and say so once.
		if len(links) > 1 && links[1].Position < links[0].Position {
			v.problem(Problem{Position: links[1].Position, Stream: links[1].Stream, Kind: EventsReordered,
				Detail: fmt.Sprintf("position %d comes after position %d", links[1].Position, links[0].Position)})
			links[0], links[1] = links[1], links[0]
		}
		if len(events) > 1 && events[1].Position < events[0].Position {
			events[0], events[1] = events[1], events[0]
		}
		switch {
		case len(links) == 0 && len(events) == 0:
			return nil
		case len(events) == 0 || len(links) > 0 && links[0].Position < events[0].Position:
			v.link(links[0], nil)
			links = links[1:]
		case len(links) == 0 || events[0].Position < links[0].Position:
			v.unchained(events[0])
			events = events[1:]
		default:
			v.link(links[0], &events[0])
			links, events = links[1:], events[1:]
		}
	}
}

// link checks one chain link and the event at its position, if any.
func (v *verifier) link(l ChainLink, e *Event) {
	switch want := Link(v.prev, l.Leaf); {
	case v.r.Head > 0 && l.Position <= v.r.Head:
		v.problem(Problem{Position: l.Position, Stream: l.Stream, Kind: EventsReordered,
			Detail: fmt.Sprintf("position %d comes after position %d", l.Position, v.r.Head)})
	case want != l.Link && l.Position > v.r.Head+1:
		// Every position the writer assigns is chained, so a gap whose
		// link does not follow is events removed with their links.
		v.problem(Problem{Position: v.r.Head + 1, Kind: EventMissing,
			Detail: fmt.Sprintf("positions %d to %d have neither an event nor a link, and the chain does not bridge them", v.r.Head+1, l.Position-1)})
	case want != l.Link:
		v.problem(Problem{Position: l.Position, Stream: l.Stream, Kind: ChainBroken,
			Detail: "its link does not follow from the link before it: a link was removed, added or changed"})
	}
	v.prev = l.Link
	v.tree.Add(l.Leaf)
	v.remember(l.Position, signed{link: l.Link, size: v.tree.Size(), root: v.tree.Root()})
	v.r.Head, v.r.HeadLink = l.Position, l.Link.String()
	if e == nil {
		run := v.missing[l.Stream]
		if run.n == 0 {
			run.first = l.Position
		}
		run.n++
		v.missing[l.Stream] = run
		return
	}
	v.r.Events++
	v.lastSeen = e.Position
	if actual := Leaf(*e); actual != l.Leaf {
		v.mismatch(l, e, actual)
	}
	v.event(*e)
}

// mismatch pairs two events that swapped places (each one's content
// hashes to the other's leaf at the other's position), else keeps the
// changed one for finish.
func (v *verifier) mismatch(l ChainLink, e *Event, _ Hash) {
	d := DigestOf(*e)
	for i, m := range v.pending {
		if LeafOf(m.pos, d) == m.leaf && LeafOf(e.Position, m.digest) == l.Leaf {
			v.pending = append(v.pending[:i], v.pending[i+1:]...)
			v.problem(Problem{Position: m.pos, ID: m.digest.ID, Stream: m.digest.Stream, Kind: EventsReordered,
				Detail: fmt.Sprintf("the events at positions %d and %d are each where the other was chained", m.pos, e.Position)})
			return
		}
	}
	if len(v.pending) < 10*maxProblems {
		v.pending = append(v.pending, mismatch{pos: e.Position, leaf: l.Leaf, digest: d})
	}
}

// unchained is an event with no link at its position.
func (v *verifier) unchained(e Event) {
	v.r.Events++
	v.problem(Problem{Position: e.Position, ID: e.ID, Stream: e.Stream, Kind: EventInserted,
		Detail: "the event has no link in the chain: it was added outside the relay's writer"})
	v.event(e)
}

// event notes what the verifier needs from an event's content.
func (v *verifier) event(e Event) {
	switch e.Type {
	case "$stream.deleted.v1":
		v.deleted[e.Stream] = true
		v.r.Deletions++
	case "inspector.purged.v1", "endpoint.retained.v1":
		v.r.noteDecision(e)
	case "log.checkpointed.v1":
		var c Checkpoint
		if err := json.Unmarshal(e.Data, &c); err != nil {
			v.problem(Problem{Position: e.Position, ID: e.ID, Stream: e.Stream, Kind: BadSignature, Detail: "the checkpoint does not decode"})
			return
		}
		v.checkpoint(c, e.Position)
		v.r.Last = &c
	}
}

// checkpoint checks a checkpoint found at position at.
func (v *verifier) checkpoint(c Checkpoint, at uint64) {
	v.r.Checkpoints++
	h, sig, err := c.head()
	switch {
	case err != nil:
		v.problem(Problem{Position: at, Kind: BadSignature, Detail: "the checkpoint is malformed: " + err.Error()})
		return
	case v.opts.PublicKey == nil:
		v.r.Unsigned++
	case !Valid(v.opts.PublicKey, h, sig):
		v.problem(Problem{Position: at, Kind: BadSignature,
			Detail: fmt.Sprintf("the checkpoint of position %d is not signed by the relay's key", c.Position)})
		return
	}
	if got, ok := v.links[c.Position]; ok {
		if p, bad := differs(c, h, got); bad {
			p.Detail = fmt.Sprintf("the checkpoint at position %d %s: the log was changed before it", at, p.Detail)
			v.problem(p)
		}
	}
}

// differs compares what a checkpoint signs with the log at its position.
func differs(c Checkpoint, h Head, got signed) (Problem, bool) {
	p := Problem{Position: c.Position, Kind: CheckpointDiffer}
	switch {
	case got.link != h.Link:
		p.Detail = fmt.Sprintf("signed link %s, the log's chain has %s there", c.Link, got.link)
	case got.size != h.TreeSize || got.root != h.Root:
		p.Detail = fmt.Sprintf("signed a tree of %d leaves with root %s, the log's chain gives %d leaves with root %s", h.TreeSize, c.Root, got.size, got.root)
	default:
		return p, false
	}
	return p, true
}

// remember keeps a link for the checkpoints that follow it.
func (v *verifier) remember(pos uint64, at signed) {
	if _, ok := v.kept[pos]; ok {
		v.kept[pos] = at
	}
	v.links[pos] = at
	v.order = append(v.order, pos)
	if len(v.order) > recentLinks {
		delete(v.links, v.order[0])
		v.order = v.order[1:]
	}
}

// finish names what only the whole log tells.
func (v *verifier) finish() {
	for _, m := range v.pending {
		v.problem(Problem{Position: m.pos, ID: m.digest.ID, Stream: m.digest.Stream, Kind: DataChanged,
			Detail: "the event's content does not match its leaf in the chain"})
	}
	for stream, run := range v.missing {
		if v.deleted[stream] {
			v.r.Removed += run.n
			continue
		}
		v.problem(Problem{Position: run.first, Stream: stream, Kind: EventMissing,
			Detail: fmt.Sprintf("%d event(s) of the stream are in the chain but not in the log, and no deletion of the stream is recorded", run.n)})
	}
	for _, k := range v.opts.Kept {
		h, _, err := k.head()
		switch got := v.kept[k.Position]; {
		case k.Position > v.r.Head:
			v.problem(Problem{Position: k.Position, Kind: Truncated,
				Detail: fmt.Sprintf("a kept checkpoint signs position %d, the log ends at %d", k.Position, v.r.Head)})
		case err != nil:
			v.problem(Problem{Position: k.Position, Kind: CheckpointDiffer, Detail: "a kept checkpoint is malformed: " + err.Error()})
		default:
			if p, bad := differs(k, h, got); bad {
				p.Detail = "a kept checkpoint " + p.Detail
				v.problem(p)
			}
		}
	}
}
