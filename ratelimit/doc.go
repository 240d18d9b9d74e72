// Package ratelimit keeps one token bucket (golang.org/x/time/rate) per key
// — a client address, a public address, an account — in a map whose size is
// bounded, client addresses grouped by network so that one network cannot
// take the map, and parses the "N/unit,burst=B" form the relay's rate flags
// take.
package ratelimit
