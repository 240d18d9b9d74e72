package evidence

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
)

// MessageSource is a log with a chain per stream: up to limit of its
// messages after a position, in position order; fewer than limit only at
// the end. VerifyStreams reads it twice from the start (after 0).
type MessageSource interface {
	Messages(ctx context.Context, after uint64, limit int) ([]Message, error)
}

// headsCheck is a checkpoint over stream heads to check against the log.
type headsCheck struct {
	position uint64 // it signs
	size     uint64
	root     Hash
	at       uint64 // the checkpoint's own position (0: kept by an auditor)
	id       string
}

type removedAt struct {
	stream string
	RemovedLink
}

type streamState struct {
	next uint64 // the revision the stream's next event should have
	// gap is the first revision found missing, not yet explained by an
	// event that came later (two events reordered).
	gap *Problem
}

type streamVerifier struct {
	opts    Options
	r       Report
	first   uint64 // position of the first chained message (0: none)
	removed []removedAt
	checks  []headsCheck
	heads   Heads
	streams map[string]*streamState
	end     uint64 // the last position read
}

// VerifyStreams checks a log with a chain per stream: every message's
// leaves against its events, every link against the one before it in its
// stream, each stream's revisions, every checkpoint's signature and that
// it signs the stream heads the log has at its position, and the kept
// checkpoints. It reads the log twice: first for the checkpoints and the
// deletions' records of what they removed (a deletion after a checkpoint
// removes events the checkpoint signed), then to check.
func VerifyStreams(ctx context.Context, src MessageSource, opts Options) (Report, error) {
	v := &streamVerifier{opts: opts, streams: map[string]*streamState{}}
	if err := eachMessage(ctx, src, v.collect); err != nil {
		return Report{}, err
	}
	for _, k := range opts.Kept {
		c, err := parseHeads(k)
		if err != nil {
			v.problem(Problem{Position: k.Position, Kind: CheckpointDiffer, Detail: "a kept checkpoint is malformed: " + err.Error()})
			continue
		}
		v.checks = append(v.checks, c)
	}
	sort.SliceStable(v.removed, func(i, j int) bool { return v.removed[i].Position < v.removed[j].Position })
	sort.SliceStable(v.checks, func(i, j int) bool { return v.checks[i].position < v.checks[j].position })
	v.end = 0
	if err := eachMessage(ctx, src, v.check); err != nil {
		return Report{}, err
	}
	v.advance(^uint64(0) - 1)
	v.finish()
	sortProblems(v.r.Problems)
	if len(v.r.Problems) > maxProblems {
		v.r.Problems = v.r.Problems[:maxProblems]
	}
	return v.r, nil
}

func eachMessage(ctx context.Context, src MessageSource, fn func(Message)) error {
	var after uint64
	for {
		ms, err := src.Messages(ctx, after, page)
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			return nil
		}
		for _, m := range ms {
			fn(m)
			if len(m.Events) > 0 {
				after = max(after, m.last())
			}
		}
		// A short page is not the end: an export's pages end early
		// past their bytes (StreamExport.Messages).
	}
}

func (v *streamVerifier) problem(p Problem) { v.r.Problems = addProblem(v.r.Problems, p) }

// parseHeads reads a checkpoint over stream heads.
func parseHeads(c Checkpoint) (headsCheck, error) {
	if c.Chain != HeadsChain {
		return headsCheck{}, fmt.Errorf("it signs a single chain (%q), and this log keeps one per stream", c.Chain)
	}
	root, err := ParseHash(c.Root)
	if err != nil {
		return headsCheck{}, err
	}
	return headsCheck{position: c.Position, size: c.TreeSize, root: root}, nil
}

// collect is the first pass: checkpoints and removed links.
func (v *streamVerifier) collect(m Message) {
	if v.first == 0 && m.Leaves != nil && len(m.Events) > 0 {
		v.first = m.first()
	}
	for _, r := range m.Removed {
		v.removed = append(v.removed, removedAt{stream: m.Stream, RemovedLink: r})
	}
	for _, e := range m.Events {
		if e.Type != "log.checkpointed.v1" {
			continue
		}
		v.r.Checkpoints++
		var c Checkpoint
		if err := json.Unmarshal(e.Data, &c); err != nil {
			v.problem(Problem{Position: e.Position, ID: e.ID, Stream: e.Stream, Kind: BadSignature, Detail: "the checkpoint does not decode"})
			continue
		}
		v.r.Last = &c
		hc, err := parseHeads(c)
		var sig []byte
		if err == nil {
			sig, err = base64.StdEncoding.DecodeString(c.Signature)
		}
		switch {
		case err != nil:
			v.problem(Problem{Position: e.Position, ID: e.ID, Stream: e.Stream, Kind: BadSignature, Detail: "the checkpoint is malformed: " + err.Error()})
			continue
		case v.opts.PublicKey == nil:
			v.r.Unsigned++
		case !ValidHeads(v.opts.PublicKey, c.Position, c.TreeSize, hc.root, sig):
			v.problem(Problem{Position: e.Position, ID: e.ID, Stream: e.Stream, Kind: BadSignature,
				Detail: fmt.Sprintf("the checkpoint of position %d is not signed by the relay's key", c.Position)})
			continue
		}
		hc.at, hc.id = e.Position, e.ID
		v.checks = append(v.checks, hc)
	}
}

// advance brings the heads up to position to: the removed links up to it,
// and checks the checkpoints that sign a position up to it.
func (v *streamVerifier) advance(to uint64) {
	for {
		switch {
		case len(v.removed) > 0 && v.removed[0].Position <= to &&
			(len(v.checks) == 0 || v.removed[0].Position <= v.checks[0].position):
			r := v.removed[0]
			v.removed = v.removed[1:]
			v.heads.Set(r.stream, r.Position, r.Link)
		case len(v.checks) > 0 && v.checks[0].position <= to:
			v.checkHeads(v.checks[0])
			v.checks = v.checks[1:]
		default:
			return
		}
	}
}

func (v *streamVerifier) checkHeads(c headsCheck) {
	if c.position > v.end && c.at == 0 {
		v.problem(Problem{Position: c.position, Kind: Truncated,
			Detail: fmt.Sprintf("a kept checkpoint signs position %d, the log ends at %d", c.position, v.end)})
		return
	}
	size, root := v.heads.Root()
	if size == c.size && root == c.root {
		return
	}
	who := "a kept checkpoint"
	if c.at != 0 {
		who = fmt.Sprintf("the checkpoint at position %d", c.at)
	}
	v.problem(Problem{Position: c.position, Kind: CheckpointDiffer,
		Detail: fmt.Sprintf("%s signed %d stream heads with root %s, the log gives %d with root %s there: the log was changed before it",
			who, c.size, c.root, size, root)})
}

func (v *streamVerifier) state(stream string) *streamState {
	st := v.streams[stream]
	if st == nil {
		st = &streamState{}
		v.streams[stream] = st
		v.r.Streams++
	}
	return st
}

// check is the second pass: one message.
func (v *streamVerifier) check(m Message) {
	if len(m.Events) == 0 {
		return
	}
	if m.first() <= v.end {
		v.problem(Problem{Position: m.first(), ID: m.Events[0].ID, Stream: m.Stream, Kind: EventsReordered,
			Detail: fmt.Sprintf("position %d comes after position %d", m.first(), v.end)})
	}
	if m.first() > 0 {
		v.advance(m.first() - 1)
	}
	v.end = max(v.end, m.last())
	v.r.Events += int64(len(m.Events))
	for _, e := range m.Events {
		if e.Type == "inspector.purged.v1" || e.Type == "endpoint.retained.v1" {
			v.r.noteDecision(e)
		}
	}
	st := v.state(m.Stream)
	prev := v.heads.link(m.Stream)
	defer v.heads.Apply(m)
	e0 := m.Events[0]
	if m.Leaves == nil {
		if v.first == 0 || e0.Position < v.first {
			v.r.Unchained++ // written before the log kept a chain
		} else {
			v.problem(Problem{Position: e0.Position, ID: e0.ID, Stream: m.Stream, Kind: EventInserted,
				Detail: "the event carries no leaf and link: it was added outside the relay's writer"})
		}
		st.next = max(st.next, e0.Revision+uint64(len(m.Events)))
		return
	}
	v.r.Head = m.last()
	if len(m.Leaves) != len(m.Events) || len(m.Links) != len(m.Events) {
		v.problem(Problem{Position: e0.Position, ID: e0.ID, Stream: m.Stream, Kind: ChainBroken,
			Detail: fmt.Sprintf("%d events carry %d leaves and %d links", len(m.Events), len(m.Leaves), len(m.Links))})
		return
	}
	chained := true // whether the first link must follow prev
	if m.isTombstone() {
		v.r.Deletions++
		var d struct {
			Events int64 `json:"events"`
		}
		_ = json.Unmarshal(e0.Data, &d)
		v.r.Removed += d.Events
		st.next, st.gap = 1, nil
	} else {
		switch r := e0.Revision; {
		case r > st.next:
			if st.gap == nil {
				st.gap = &Problem{Position: e0.Position, ID: e0.ID, Stream: m.Stream, Kind: EventMissing,
					Detail: fmt.Sprintf("revisions %d to %d of the stream are not in the log (its next event has revision %d)", st.next, r-1, r)}
			}
			chained = false
		case r < st.next && st.gap != nil:
			v.problem(Problem{Position: st.gap.Position, ID: st.gap.ID, Stream: m.Stream, Kind: EventsReordered,
				Detail: fmt.Sprintf("revision %d of the stream comes after revision %d (at position %d)", r, st.gap.Position, e0.Position)})
			st.gap = nil
			chained = false
		case r < st.next:
			v.problem(Problem{Position: e0.Position, ID: e0.ID, Stream: m.Stream, Kind: EventInserted,
				Detail: fmt.Sprintf("revision %d is in the stream already", r)})
			chained = false
		}
		st.next = max(st.next, e0.Revision+uint64(len(m.Events)))
	}
	for i, e := range m.Events {
		if StreamLeaf(e) != m.Leaves[i] {
			v.problem(Problem{Position: e.Position, ID: e.ID, Stream: m.Stream, Kind: DataChanged,
				Detail: "the event's content does not match its leaf in the chain"})
		}
		before := prev
		if i > 0 {
			before = m.Links[i-1]
		}
		if (i > 0 || chained) && Link(before, m.Leaves[i]) != m.Links[i] {
			v.problem(Problem{Position: e.Position, ID: e.ID, Stream: m.Stream, Kind: ChainBroken,
				Detail: "its link does not follow from the stream's link before it: a link was removed, added or changed"})
		}
	}
}

// link is the stream's head link (Hash{} for a stream not seen).
func (h *Heads) link(stream string) Hash {
	if sh := h.m[stream]; sh != nil {
		return sh.link
	}
	return Hash{}
}

func (v *streamVerifier) finish() {
	for _, st := range v.streams {
		if st.gap != nil {
			v.problem(*st.gap)
		}
	}
	for _, c := range v.checks { // kept ones beyond the end
		v.checkHeads(c)
	}
}
