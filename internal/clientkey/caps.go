package clientkey

// NetworkShare is how many times a per-client cap one client network
// (Network: an IPv4 /24, an IPv6 /48) may hold over all its clients, unless
// a cap of its own is set: room for a large sender that sends from a few
// addresses of one /24 (GitHub and Stripe send from a few /24s), and a
// bound on the 256 addresses of a /24 and the 65 536 /64s of a /48, which
// would otherwise each hold the per-client cap.
const NetworkShare = 4

// NetworkCap is the cap of one client network: perNetwork when set (above
// zero), else NetworkShare × perClient.
func NetworkCap(perNetwork, perClient int) int {
	if perNetwork > 0 {
		return perNetwork
	}
	return NetworkShare * perClient
}

// Full names the cap a Caps.Take found full.
type Full int

const (
	// NotFull: the take was counted.
	NotFull Full = iota
	// ClientFull: the client holds its cap already.
	ClientFull
	// NetworkFull: the client's network holds its cap already.
	NetworkFull
)

// Caps counts what each client holds open (connections, requests in
// flight, streams, sockets) against a cap per client and one per client
// network: the one way every per-client bound of open things also bounds
// the client's network. The zero value is ready.
type Caps struct {
	clients, networks Counter
}

// Take counts one more for key if it holds fewer than perClient and its
// network fewer than perNetwork (a key with no network, such as an
// account's, has only the client cap); otherwise it counts nothing and
// names the cap that is full, the client's first.
func (c *Caps) Take(key string, perClient, perNetwork int) Full {
	if !c.clients.Take(key, perClient) {
		return ClientFull
	}
	network := Network(key)
	if network == "" {
		return NotFull
	}
	if !c.networks.Take(network, perNetwork) {
		c.clients.Release(key)
		return NetworkFull
	}
	return NotFull
}

// Release gives back what a Take of key counted.
func (c *Caps) Release(key string) {
	if network := Network(key); network != "" {
		c.networks.Release(network)
	}
	c.clients.Release(key)
}

// Held is what the client key holds now.
func (c *Caps) Held(key string) int { return c.clients.Held(key) }

// NetworkHeld is what network (as Network names it) holds now over all
// its clients.
func (c *Caps) NetworkHeld(network string) int { return c.networks.Held(network) }

// Clients is how many clients hold anything.
func (c *Caps) Clients() int { return c.clients.Clients() }
