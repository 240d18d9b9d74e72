package jetstream

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Schemes of the URLs this adapter accepts: plain NATS and NATS over TLS.
var schemes = []string{"nats://", "tls://"}

// IsURL reports whether an event store address names a NATS server (as
// opposed to EventStoreDB's esdb:// or the embedded log's empty string).
func IsURL(s string) bool {
	for _, scheme := range schemes {
		if strings.HasPrefix(s, scheme) {
			return true
		}
	}
	return false
}

// maxReplicas is JetStream's own limit on a stream's replicas.
const maxReplicas = 5

// ParseURL splits an event store address into the servers to dial and the
// stream's options. The address is one NATS URL or a comma-separated list
// of cluster seeds, optionally followed by one query for all of them:
//
//	nats://user:pass@n1:4222,nats://n2:4222,nats://n3:4222?replicas=3&stream=RELAY_EVENTS&subject=relay.events
//
// stream, subject and replicas set Options.Stream, Options.Subject and
// Options.Replicas. Errors never repeat the address, which may hold a
// password.
func ParseURL(s string) (servers string, opts Options, err error) {
	base, query, _ := strings.Cut(s, "?")
	seeds := strings.Split(base, ",")
	for i, seed := range seeds {
		if err := checkSeed(seed); err != nil {
			return "", Options{}, fmt.Errorf("nats URL %d of %d: %w", i+1, len(seeds), err)
		}
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", Options{}, fmt.Errorf("nats URL query: not a valid query")
	}
	for key, vs := range values {
		if len(vs) != 1 {
			return "", Options{}, fmt.Errorf("nats URL query: %q given %d times", key, len(vs))
		}
		v := vs[0]
		switch key {
		case "stream":
			if !validStreamName(v) {
				return "", Options{}, fmt.Errorf("nats URL query: stream %q is not a JetStream stream name", v)
			}
			opts.Stream = v
		case "subject":
			if !validSubjectPrefix(v) {
				return "", Options{}, fmt.Errorf("nats URL query: subject %q is not a subject without wildcards", v)
			}
			opts.Subject = v
		case "replicas":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxReplicas {
				return "", Options{}, fmt.Errorf("nats URL query: replicas %q is not 1 to %d", v, maxReplicas)
			}
			opts.Replicas = n
		default:
			return "", Options{}, fmt.Errorf("nats URL query: unknown option %q (stream, subject, replicas)", key)
		}
	}
	return base, opts, nil
}

func checkSeed(seed string) error {
	if !IsURL(seed) {
		return fmt.Errorf("want nats://host:port or tls://host:port")
	}
	u, err := url.Parse(seed)
	if err != nil {
		return fmt.Errorf("not a URL")
	}
	if u.Hostname() == "" {
		return fmt.Errorf("no host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port out of range")
		}
	}
	if (u.Path != "" && u.Path != "/") || u.Fragment != "" {
		return fmt.Errorf("a NATS URL has no path")
	}
	return nil
}

// validStreamName follows JetStream's rule: no white space, ".", "*", ">",
// path separators, and not empty.
func validStreamName(name string) bool {
	return name != "" && len(name) <= 255 && !strings.ContainsAny(name, " \t\r\n.*>/\\")
}

// validSubjectPrefix accepts dot-separated tokens without wildcards or white
// space.
func validSubjectPrefix(subject string) bool {
	if subject == "" || len(subject) > 255 {
		return false
	}
	for _, token := range strings.Split(subject, ".") {
		if token == "" || strings.ContainsAny(token, " \t\r\n*>") {
			return false
		}
	}
	return true
}
