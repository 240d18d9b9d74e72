package esdb

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/internal/envelope"
	"github.com/relayhq/relay/evidence"
)

// The chain per stream (package evidence, docs/evidence.md) travels in each
// event's user metadata: the adapter appends the event's leaf and link to
// the metadata's JSON object,
//
//	{…metadata…,"relay_leaf":"<64 hex>","relay_link":"<64 hex>"}
//
// a suffix of fixed length, so that the metadata the leaf hashes is the
// stored bytes with the suffix cut off, exactly. Readers that decode the
// metadata as JSON ignore the two fields.
const (
	leafField = `"relay_leaf":"`
	linkField = `","relay_link":"`
	// chainSuffix is the length of the suffix after the metadata's last
	// byte ("}"), with its leading comma.
	chainSuffix = 1 + len(leafField) + 64 + len(linkField) + 64 + 2
)

// withChain is the user metadata that carries md (an encoded JSON object)
// with the event's leaf and link.
func withChain(md []byte, leaf, link evidence.Hash) []byte {
	out := make([]byte, 0, len(md)+chainSuffix)
	out = append(out, md[:len(md)-1]...)
	if !bytes.Equal(md, []byte("{}")) {
		out = append(out, ',')
	}
	out = append(out, leafField...)
	out = hex.AppendEncode(out, leaf[:])
	out = append(out, linkField...)
	out = hex.AppendEncode(out, link[:])
	return append(out, `"}`...)
}

// splitChain reverses withChain: the metadata as the leaf hashed it, and
// the leaf and link. ok is false for user metadata without a chain (events
// written before it, or by another tool), returned whole.
func splitChain(stored []byte) (md []byte, leaf, link evidence.Hash, ok bool) {
	n := len(stored) - (chainSuffix - 1) // the suffix without its comma
	if n < 1 {
		return stored, leaf, link, false
	}
	tail := stored[n:]
	if !bytes.HasPrefix(tail, []byte(leafField)) || !bytes.HasSuffix(tail, []byte(`"}`)) ||
		!bytes.Equal(tail[len(leafField)+64:len(leafField)+64+len(linkField)], []byte(linkField)) {
		return stored, leaf, link, false
	}
	leafText, linkText := string(tail[len(leafField):len(leafField)+64]), string(tail[len(leafField)+64+len(linkField):len(tail)-2])
	l1, err1 := evidence.ParseHash(leafText)
	l2, err2 := evidence.ParseHash(linkText)
	// Only the form withChain writes (lower-case hex) is a chain.
	if err1 != nil || err2 != nil || l1.String() != leafText || l2.String() != linkText {
		return stored, leaf, link, false
	}
	switch {
	case n == 1 && stored[0] == '{': // the metadata was {}
		md = []byte("{}")
	case n >= 3 && stored[0] == '{' && stored[n-1] == ',':
		md = append(append([]byte(nil), stored[:n-1]...), '}')
	default:
		return stored, leaf, link, false
	}
	return md, l1, l2, true
}

// toProposedChained encodes events appended to stream after prev, the link
// of the stream's event before them (zero for a new stream), the first at
// revision first: toProposed's events with the chain in their metadata.
func toProposedChained(stream string, first uint64, prev evidence.Hash, events []domain.EventData) ([]esdb.EventData, error) {
	proposed, err := toProposed(events)
	if err != nil {
		return nil, err
	}
	evs := make([]evidence.Event, len(proposed))
	for i, p := range proposed {
		// The ID as the server hands it back: the canonical form.
		evs[i] = evidence.Event{ID: p.EventID.String(), Stream: stream, Revision: first + uint64(i), Type: p.EventType, Data: p.Data, Metadata: p.Metadata}
	}
	leaves, links := evidence.ChainEvents(prev, evs)
	for i := range proposed {
		proposed[i].Metadata = withChain(proposed[i].Metadata, leaves[i], links[i])
	}
	return proposed, nil
}

// lastEvent is what a chained append needs of a stream's newest event.
type lastEvent struct {
	revision uint64
	id       string
	link     evidence.Hash
}

// appendPlan is how a chained append is made: the exact expectation sent
// to the server, the revision of its first event, and the link it chains
// to (prev), or the revision whose link it chains to (linkAt, read first).
type appendPlan struct {
	expected esdb.ExpectedRevision
	first    uint64
	prev     evidence.Hash
	linkAt   *uint64
}

// planAppend decides a chained append. EventStoreDB checks nothing for
// Any, so two nodes could both chain to one head: an append expects the
// exact revision of the head it chains to, and a conflict (another node
// appended in between) is tried again with the new head when the caller
// asked for Any or StreamExists. last is the stream's newest event (nil:
// none), read for Any and StreamExists only; ids are the events' IDs. An
// Any append whose last event is already the stream's newest is a retry
// of one that succeeded: it is made again at the place it was made, where
// the server recognises it and writes nothing.
func planAppend(expected domain.ExpectedRevision, last *lastEvent, ids []string) appendPlan {
	if expected.IsNoStream() {
		return appendPlan{expected: esdb.NoStream{}}
	}
	if rev, ok := expected.ExactRevision(); ok {
		return appendPlan{expected: esdb.Revision(rev), first: rev + 1, linkAt: &rev}
	}
	n := uint64(len(ids))
	switch {
	case last == nil && expected.IsStreamExists():
		return appendPlan{expected: esdb.StreamExists{}} // refused by the server
	case last == nil:
		return appendPlan{expected: esdb.NoStream{}}
	case n > 0 && last.id == ids[n-1] && last.revision+1 == n:
		return appendPlan{expected: esdb.NoStream{}}
	case n > 0 && last.id == ids[n-1] && last.revision >= n:
		rev := last.revision - n
		return appendPlan{expected: esdb.Revision(rev), first: rev + 1, linkAt: &rev}
	}
	return appendPlan{expected: esdb.Revision(last.revision), first: last.revision + 1, prev: last.link}
}

// retried reports whether a conflict on an append the caller made with
// expected is tried again: only when the exact revision was the adapter's.
func retried(expected domain.ExpectedRevision) bool {
	_, exact := expected.ExactRevision()
	return !exact && !expected.IsNoStream()
}

// maxChainAttempts bounds the tries of an Any or StreamExists append (or
// deletion) whose head moves under it; each retry means another append
// won, so the log is progressing (as the JetStream adapter's).
const maxChainAttempts = 1000

// removedType is the type of the record a deletion leaves, in a stream of
// its own (removedStream), of what it removed and of its tombstone's chain:
// EventStoreDB writes the tombstone itself ($streamDeleted), with no
// metadata of the adapter's. Reads of $all hide these streams (isSystem).
const removedType = "relay.stream-removed.v1"

// removedPrefix starts the name of a deletion record's stream.
const removedPrefix = "log-removed-"

// removedStream is the stream of the record of stream's deletion.
func removedStream(stream string) string { return removedPrefix + stream }

// maxRemoved bounds the events a chained deletion lists (the record must
// fit the server's append limit, 1 MiB by default: about 75 bytes each).
const maxRemoved = 10000

// removalRecord is a deletion record's data: the tombstone as the chain
// hashes it (the server's own carries none of this), its leaf and link,
// and each removed event's position and link.
type removalRecord struct {
	Tombstone struct {
		ID       string `json:"id"`
		Data     []byte `json:"data"`
		Metadata []byte `json:"metadata"`
	} `json:"tombstone"`
	Leaf    string `json:"leaf"`
	Link    string `json:"link"`
	Removed string `json:"removed"` // evidence.FormatRemoved
}

// newRemovalRecord chains the tombstone d of stream after head (the link
// of its newest event); removed lists the events it removes.
func newRemovalRecord(stream string, head evidence.Hash, d domain.StreamDeleted, removed []evidence.RemovedLink, now time.Time) (removalRecord, error) {
	tomb, err := envelope.Tombstone(d, now)
	if err != nil {
		return removalRecord{}, err
	}
	md, err := envelope.EncodeMetadata(tomb.Metadata)
	if err != nil {
		return removalRecord{}, err
	}
	leaves, links := evidence.ChainEvents(head, []evidence.Event{{ID: tomb.ID, Stream: stream, Type: domain.TypeStreamDeleted, Data: tomb.Data, Metadata: md}})
	var r removalRecord
	r.Tombstone.ID, r.Tombstone.Data, r.Tombstone.Metadata = tomb.ID, tomb.Data, md
	r.Leaf, r.Link, r.Removed = leaves[0].String(), links[0].String(), evidence.FormatRemoved(removed)
	return r, nil
}

// errUnplaced is a stream read whose events the server gave no commit
// positions: a deletion cannot record where its events were.
var errUnplaced = errors.New("the server reports no commit positions on stream reads")

// removalOf is the record of the deletion of stream, whose events (all of
// them, in order, as stored) are raw.
func removalOf(stream string, raw []placed, now time.Time) (removalRecord, error) {
	if len(raw) == 0 {
		return removalRecord{}, errors.New("no events to record")
	}
	removed := make([]evidence.RemovedLink, len(raw))
	var head evidence.Hash
	for i, p := range raw {
		if p.pos == 0 {
			return removalRecord{}, errUnplaced
		}
		_, _, head, _ = splitChain(p.rec.UserMetadata)
		removed[i] = evidence.RemovedLink{Position: p.pos, Link: head}
	}
	last := raw[len(raw)-1]
	d := domain.StreamDeleted{Stream: stream, Events: int64(len(raw)), LastRevision: int64(last.rec.EventNumber), LastPosition: last.pos}
	return newRemovalRecord(stream, head, d, removed, now)
}

// proposed is the record as the client sends it.
func (r removalRecord) proposed() (esdb.EventData, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return esdb.EventData{}, fmt.Errorf("encode the deletion's record: %w", err)
	}
	return esdb.EventData{EventID: uuid.New(), EventType: removedType, ContentType: esdb.ContentTypeJson, Data: b}, nil
}

// messageOf is an event read from $all, at port position pos, as the
// chain's verifier reads it: one message per event, with the leaf and link
// its metadata carries. The server's tombstone takes its chain from the
// deletion's record (nil when there is none: the verifier reports it).
func messageOf(r *esdb.RecordedEvent, pos uint64, record *removalRecord) (evidence.Message, error) {
	if r.EventType == serverTombstone {
		return tombstoneMessage(r, pos, record)
	}
	md, leaf, link, ok := splitChain(r.UserMetadata)
	m := evidence.Message{Stream: r.StreamID, Events: []evidence.Event{{Position: pos, ID: r.EventID.String(), Stream: r.StreamID,
		Revision: r.EventNumber, Type: r.EventType, Data: r.Data, Metadata: md}}}
	if ok {
		m.Leaves, m.Links = []evidence.Hash{leaf}, []evidence.Hash{link}
	}
	return m, nil
}

func tombstoneMessage(r *esdb.RecordedEvent, pos uint64, record *removalRecord) (evidence.Message, error) {
	if record == nil {
		rec, err := toRecorded(r, pos)
		if err != nil {
			return evidence.Message{}, err
		}
		md, err := envelope.EncodeMetadata(rec.Metadata)
		if err != nil {
			return evidence.Message{}, err
		}
		return evidence.Message{Stream: r.StreamID, Events: []evidence.Event{{Position: pos, ID: rec.ID, Stream: r.StreamID,
			Type: rec.Type, Data: rec.Data, Metadata: md}}}, nil
	}
	leaf, err1 := evidence.ParseHash(record.Leaf)
	link, err2 := evidence.ParseHash(record.Link)
	removed, err3 := evidence.ParseRemoved(record.Removed)
	m := evidence.Message{Stream: r.StreamID, Events: []evidence.Event{{Position: pos, ID: record.Tombstone.ID, Stream: r.StreamID,
		Type: domain.TypeStreamDeleted, Data: record.Tombstone.Data, Metadata: record.Tombstone.Metadata}}}
	if err1 != nil || err2 != nil || err3 != nil {
		// A record that does not parse: the verifier sees a broken chain.
		m.Leaves, m.Links = []evidence.Hash{}, []evidence.Hash{}
		return m, nil
	}
	m.Leaves, m.Links, m.Removed = []evidence.Hash{leaf}, []evidence.Hash{link}, removed
	return m, nil
}

// parseRecord reads a deletion record's data.
func parseRecord(data []byte) (*removalRecord, error) {
	var r removalRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("the deletion's record does not decode: %w", err)
	}
	return &r, nil
}
