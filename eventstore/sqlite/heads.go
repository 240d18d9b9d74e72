package sqlite

// Stream heads in memory. An append with an expected revision needs its
// stream's head; reading it from the (stream, revision) index costs a query
// per append. The writer is the only writer of the log (the data folder is
// locked to one process, and DeleteStream and retention go through the
// writer), so it keeps the heads it wrote or read in a bounded cache,
// updated only when a batch commits: a batch's own heads sit in its
// pending map until then, and are dropped with it when it fails.
//
// The cache never makes an append succeed that the log would refuse: a head
// lower than the stored one ends in a UNIQUE (stream, revision) clash, any
// head that does not match the expected revision sends the append to the
// careful path (applyChecked), and both read the head from the database.

// headsPerGeneration bounds the cache: it keeps at most two generations of
// this many streams. A stream is usually appended to again soon after its
// first event (a delivery's outcome follows its request), so the newest
// streams are the ones worth keeping.
const headsPerGeneration = 4096

// headCache holds the heads of recently written streams: cur takes new
// entries, old is the generation before; a hit in old moves the entry to
// cur, and once cur is full old is dropped and cur takes its place. The
// writer alone uses it.
type headCache struct {
	cur, old map[string]head
}

// head is a stream's last revision and whether its only event is its
// tombstone. A stream with no events is not cached.
type head struct {
	rev     uint64
	deleted bool
}

func newHeadCache() *headCache {
	return &headCache{cur: make(map[string]head), old: make(map[string]head)}
}

func (c *headCache) get(stream string) (head, bool) {
	if h, ok := c.cur[stream]; ok {
		return h, true
	}
	h, ok := c.old[stream]
	if ok {
		c.put(stream, h)
	}
	return h, ok
}

func (c *headCache) put(stream string, h head) {
	if _, ok := c.cur[stream]; !ok && len(c.cur) >= headsPerGeneration {
		c.old, c.cur = c.cur, make(map[string]head, headsPerGeneration)
	}
	c.cur[stream] = h
}

// commit takes a committed batch's heads.
func (c *headCache) commit(pending map[string]head) {
	for stream, h := range pending {
		c.put(stream, h)
	}
}

// batchHeads is what a batch sees: its own heads first, then the cache.
type batchHeads struct {
	cache   *headCache
	pending map[string]head // written or read by this batch, not committed yet
}

func (b *batchHeads) get(stream string) (head, bool) {
	if h, ok := b.pending[stream]; ok {
		return h, true
	}
	return b.cache.get(stream)
}
