package cluster

import (
	"fmt"
	"net/url"
	"strings"
)

// ParseServers splits a --bus value, one NATS URL or a comma-separated
// list of a cluster's seeds (nats:// or tls://), into the URLs to dial.
// Errors never repeat a URL, which may hold a password.
func ParseServers(s string) ([]string, error) {
	seeds := strings.Split(s, ",")
	for i, seed := range seeds {
		u, err := url.Parse(seed)
		switch {
		case err != nil:
			return nil, fmt.Errorf("bus URL %d of %d: not a URL", i+1, len(seeds))
		case u.Scheme != "nats" && u.Scheme != "tls":
			return nil, fmt.Errorf("bus URL %d of %d: want nats:// or tls://", i+1, len(seeds))
		case u.Host == "":
			return nil, fmt.Errorf("bus URL %d of %d: no host", i+1, len(seeds))
		case u.Path != "" && u.Path != "/", u.RawQuery != "":
			return nil, fmt.Errorf("bus URL %d of %d: no path or query expected", i+1, len(seeds))
		}
	}
	return seeds, nil
}
