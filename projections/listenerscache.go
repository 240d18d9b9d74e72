package projections

import (
	"sync"

	"github.com/relayhq/relay/readmodel"
)

// listenersCacheSize bounds the Endpoints whose open sessions are kept; when
// it is full it starts over, as addressCache does.
const listenersCacheSize = 4096

// listenersCache keeps the rows OpenListeners read, per Endpoint: a node of
// a cluster reads them for every proxied delivery (the listeners' filters
// at admission, then the forward), and they change only when a session
// starts or ends. A batch that records a start or an end drops its
// Endpoint after committing, before the batch's position is published; a
// read that raced with a batch does not fill the cache (gen counts
// batches, as in addressCache). The rows are shared: callers only read
// them.
type listenersCache struct {
	mu  sync.Mutex
	gen uint64
	m   map[string][]readmodel.AgentSession
}

func (c *listenersCache) get(endpointID string) (rows []readmodel.AgentSession, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rows, ok = c.m[endpointID]
	return rows, c.gen, ok
}

func (c *listenersCache) put(endpointID string, rows []readmodel.AgentSession, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.m == nil || len(c.m) >= listenersCacheSize {
		c.m = make(map[string][]readmodel.AgentSession)
	}
	c.m[endpointID] = rows
}

// committed drops the Endpoints whose sessions a committed batch changed.
func (c *listenersCache) committed(changed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, id := range changed {
		delete(c.m, id)
	}
}

// clear empties the cache (the views were reset).
func (c *listenersCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m = nil
}
